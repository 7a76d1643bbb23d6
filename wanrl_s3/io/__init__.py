"""Tensors in and out (private): numpy or torch as raw little-endian bytes, .safetensors files."""
