# Stand-in for Transformer Engine's core package installed without its PyTorch extension:
# it reports a version, but there is no transformer_engine.pytorch submodule.
__version__ = "2.9.0"
