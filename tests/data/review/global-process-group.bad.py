import torch
from megatron.core import parallel_state


class Head(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.tp = parallel_state.get_tensor_model_parallel_world_size()
        self.proj = torch.nn.Linear(hidden, hidden // self.tp)
