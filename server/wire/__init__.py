"""What both ends of a wire share: the server and the client read and write these alike.

Tensor bytes and their checks, `.npy` bodies, well-known protobuf values, server-sent
events, gRPC status details, the KServe v2 / Open Inference Protocol tensors, and the
one error type for a value that cannot be decoded.
"""
