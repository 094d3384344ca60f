"""The one toy model every benchmark server calls, so each side does identical work.

Four bounded floats in, a label and a score out: small enough that the numbers measure
the serving stack (parse, validate, dispatch, encode), not the model.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

FEATURES = ("sepal_length", "sepal_width", "petal_length", "petal_width")

#: One feature: a float in [0, 100] (pydantic checks the bounds on both sides).
Feature = Annotated[float, Field(ge=0, le=100)]

#: The JSON body every HTTP load generator sends.
BODY = b'{"sepal_length":5.1,"sepal_width":3.5,"petal_length":1.4,"petal_width":0.2}'
TOKEN = "tok "


class PredictRequest(BaseModel):
    """The bare baselines' input model: the same fields and rules tensorwire generates."""

    model_config = ConfigDict(extra="forbid")

    sepal_length: Feature
    sepal_width: Feature
    petal_length: Feature
    petal_width: Feature


class Prediction(BaseModel):
    label: str
    score: float


_WEIGHTS = (0.2, -0.1, 0.5, 0.9)


def classify(sepal_length: float, sepal_width: float, petal_length: float,
             petal_width: float) -> Prediction:
    score = (sepal_length * _WEIGHTS[0] + sepal_width * _WEIGHTS[1]
             + petal_length * _WEIGHTS[2] + petal_width * _WEIGHTS[3])
    label = "setosa" if score < 2 else "versicolor" if score < 4 else "virginica"
    return Prediction(label=label, score=score)
