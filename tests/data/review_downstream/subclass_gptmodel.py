# source: modelscope/ms-swift@b6af05674945e6fae3cca8fc02698bbd97cef6d9:swift/megatron/model/gpt_model.py:55
# expect: gptmodel-deprecated 0.19.2 line 7
# silent: gptmodel-deprecated 0.18.2
from megatron.core.models.gpt import GPTModel as McoreGPTModel


class GPTModel(McoreGPTModel):
    def __init__(self, config, transformer_layer_spec, vocab_size, max_sequence_length):
        super().__init__(config, transformer_layer_spec, vocab_size, max_sequence_length)
