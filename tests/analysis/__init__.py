"""Tests of analysis/plots: loaders, the error summary and every figure."""
