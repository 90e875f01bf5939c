#!/bin/bash
# 2 nodes x 8 GPUs
torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 4 \
    --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 8 \
    --num-experts 8 \
    --moe-router-topk 2 \
    --num-layers 16 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 4096 --max-position-embeddings 4096 \
    --micro-batch-size 1 --global-batch-size 64 \
    --vocab-size 32000 --sequence-parallel --disable-bias-linear --bf16
