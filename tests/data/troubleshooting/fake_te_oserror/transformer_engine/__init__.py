# Stand-in for a Transformer Engine wheel built against another torch/CUDA: its __init__
# loads the core shared library with ctypes, which fails with OSError (not ImportError).
raise OSError(
    "/usr/local/lib/python3.12/site-packages/transformer_engine/libtransformer_engine.so: "
    "undefined symbol: _ZN3c104cuda9SetDeviceEa"
)
