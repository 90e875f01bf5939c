# Stand-in for a Transformer Engine whose compiled torch extension has an ABI mismatch:
# Python reports an undefined symbol in an extension module as ImportError.
raise ImportError(
    "/usr/local/lib/python3.12/site-packages/transformer_engine_torch.cpython-312-x86_64-linux-gnu.so: "
    "undefined symbol: _ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE"
)
