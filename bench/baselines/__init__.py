"""The bare-framework servers tensorwire is measured against."""
