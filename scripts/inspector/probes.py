"""The probe tables, as data.

KERNELS: one entry per optional package Megatron Core can use.  ``imports`` are imported in
order in one child; ``symbols`` must then be attributes of the last module; ``dist`` is the pip
distribution name (its version is read from metadata even when the import fails);
``verdict`` names Megatron's own flag for it (a key of VERDICTS), when it has one.

VERDICTS: Megatron Core's module-level flags, read after importing the module in the
megatron child.  Keys are stable report keys.
"""

KERNELS = {
    "transformer_engine": {
        "imports": ["transformer_engine", "transformer_engine.pytorch"],
        "symbols": [], "dist": ["transformer-engine", "transformer_engine"],
        "version_attr": "transformer_engine.__version__", "verdict": "HAVE_TE",
    },
    "apex": {
        "imports": ["apex"], "symbols": [], "dist": ["apex"],
        "version_attr": None, "verdict": "HAVE_APEX",
    },
    "apex_fused_layer_norm": {
        "imports": ["fused_layer_norm_cuda"], "symbols": [], "dist": ["apex"],
        "version_attr": None, "verdict": "HAVE_FUSED_LAYER_NORM",
    },
    "gradient_accumulation_fusion": {
        "imports": ["fused_weight_gradient_mlp_cuda"], "symbols": [], "dist": ["apex"],
        "version_attr": None, "verdict": None,
    },
    "fused_softmax": {
        "imports": ["scaled_masked_softmax_cuda"], "symbols": [], "dist": ["apex"],
        "version_attr": None, "verdict": None,
    },
    "flash_attn": {
        "imports": ["flash_attn"], "symbols": ["flash_attn_func"], "dist": ["flash-attn", "flash_attn"],
        "version_attr": "flash_attn.__version__", "verdict": None,
    },
    "flash_attn_3": {
        "imports": ["flash_attn_3.flash_attn_interface"], "symbols": ["_flash_attn_forward"],
        "dist": ["flash-attn-3", "flash_attn_3"], "version_attr": None, "verdict": "HAVE_FA3",
        "alternatives": [["flash_attn_interface"]],
    },
    "flash_attn_4": {
        "imports": ["flash_attn.cute"], "symbols": ["flash_attn_varlen_func"],
        "dist": ["flash-attn-4"], "version_attr": None, "verdict": "HAVE_FA4",
    },
    "mamba_ssm": {
        "imports": ["mamba_ssm"], "symbols": [], "dist": ["mamba-ssm", "mamba_ssm"],
        "version_attr": "mamba_ssm.__version__", "verdict": "HAVE_MAMBA_SSM",
    },
    "causal_conv1d": {
        "imports": ["causal_conv1d"], "symbols": ["causal_conv1d_fn"],
        "dist": ["causal-conv1d", "causal_conv1d"], "version_attr": "causal_conv1d.__version__",
        "verdict": None,
    },
    "grouped_gemm": {
        "imports": ["grouped_gemm"], "symbols": [], "dist": ["grouped_gemm", "grouped-gemm"],
        "version_attr": None, "verdict": None,
    },
    "triton": {
        "imports": ["triton"], "symbols": [], "dist": ["triton"],
        "version_attr": "triton.__version__", "verdict": None,
    },
    "nvidia_resiliency_ext": {
        "imports": ["nvidia_resiliency_ext"], "symbols": [], "dist": ["nvidia-resiliency-ext"],
        "version_attr": None, "verdict": None,
    },
}

# report key -> (module, attribute)
VERDICTS = {
    "HAVE_TE": ("megatron.core.extensions.transformer_engine", "HAVE_TE"),
    "HAVE_APEX": ("megatron.core.models.gpt.gpt_layer_specs", "HAVE_APEX"),
    "HAVE_FUSED_LAYER_NORM": ("megatron.core.fusions.fused_layer_norm", "HAVE_FUSED_LAYER_NORM"),
    "HAVE_PERSIST_LAYER_NORM": ("megatron.core.fusions.fused_layer_norm", "HAVE_PERSIST_LAYER_NORM"),
    "HAVE_FA3": ("megatron.core.transformer.attention", "HAVE_FA3"),
    "HAVE_FA4": ("megatron.core.transformer.attention", "HAVE_FA4"),
    "HAVE_MAMBA_SSM": ("megatron.core.ssm.mamba_mixer", "HAVE_MAMBA_SSM"),
    "HAVE_TE_GRAPHS": ("megatron.core.transformer.cuda_graphs", "HAVE_TE_GRAPHS"),
}

# Module whose TE* names megatron sets to None (TE too old) or to MagicMock (TE absent).
TE_EXTENSION_MODULE = "megatron.core.extensions.transformer_engine"

# TE's own precision checks, tried in order (names moved between TE releases).
PRECISION_CHECKS = {
    "fp8": [("transformer_engine.pytorch.fp8", "check_fp8_support"),
            ("transformer_engine.pytorch.quantization", "check_fp8_support"),
            ("transformer_engine.pytorch", "is_fp8_available")],
    "mxfp8": [("transformer_engine.pytorch.fp8", "check_mxfp8_support"),
              ("transformer_engine.pytorch.quantization", "check_mxfp8_support"),
              ("transformer_engine.pytorch", "is_mxfp8_available")],
    "nvfp4": [("transformer_engine.pytorch.fp8", "check_nvfp4_support"),
              ("transformer_engine.pytorch.quantization", "check_nvfp4_support"),
              ("transformer_engine.pytorch", "is_nvfp4_available")],
}
