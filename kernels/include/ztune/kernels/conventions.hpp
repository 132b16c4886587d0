#pragma once
// Conventions shared by every kernel in ztune::kernels (CPU references here, CUDA
// versions in issue 7 with the same argument order plus a trailing stream):
//  - fp32 buffers, row-major, shapes in the comments as [rows, cols];
//  - N = number of token rows (B·T, or the local shard of them), C = channels;
//  - forward kernels WRITE their outputs (=);
//  - backward kernels ACCUMULATE (+=) into every gradient they produce, of inputs
//    and of parameters alike (llm.c's convention): callers zero gradients once and
//    residual branches add up for free;
//  - a null gradient pointer means "not needed" where a comment says so.
namespace ztune::kernels {}
