import torch
from megatron.core import parallel_state


class Head(torch.nn.Module):
    def __init__(self, hidden, pg_collection):
        super().__init__()
        self.tp = pg_collection.tp.size()
        self.proj = torch.nn.Linear(hidden, hidden // self.tp)


def setup():
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    return parallel_state.get_tensor_model_parallel_world_size()
