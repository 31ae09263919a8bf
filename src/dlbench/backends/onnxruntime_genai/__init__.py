"""ONNX Runtime GenAI: the decoder workloads, converted by its own model builder."""
