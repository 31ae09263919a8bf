"""PyTorch: eager, torch.compile and TorchScript; also builds the reference and the ONNX exports."""
