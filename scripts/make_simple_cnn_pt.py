#!/usr/bin/env python3
"""Writes samples/data/simple_cnn.pt (torch.save of a state_dict) for samples/pytorch_to_keel.cpp.

The model is the PyTorch twin of samples/cifar10_cnn.cpp's network with --bn (three blocks of
Conv2d(3x3, same, no bias) + BatchNorm2d + ReLU + MaxPool2d(2) with 16, 32, 64 filters,
Flatten, Linear(1024, 128), ReLU, Dropout(0.5), Linear(128, 10)), at full size: 156k parameters,
about 630 KB. Its weights are torch's initialisation after a few training steps on random
images (so that the BatchNorm running statistics are not the trivial 0 and 1). Also written:
simple_cnn_input.npy (4 images, NCHW float32, as torch takes them) and simple_cnn_logits.npy
(torch's eval-mode output for them).

    /usr/bin/python3 scripts/make_simple_cnn_pt.py [OUT_DIR]     (default: samples/data)
"""
import os
import sys

import numpy as np
import torch


def simple_cnn():
    layers = []
    channels = 3
    for filters in (16, 32, 64):
        # keel's BatchNormalization has Keras' epsilon 1e-3 (torch's default is 1e-5).
        layers += [torch.nn.Conv2d(channels, filters, 3, padding=1, bias=False),
                   torch.nn.BatchNorm2d(filters, eps=1e-3), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
        channels = filters
    layers += [torch.nn.Flatten(), torch.nn.Linear(64 * 4 * 4, 128), torch.nn.ReLU(), torch.nn.Dropout(0.5),
               torch.nn.Linear(128, 10)]
    return torch.nn.Sequential(*layers)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples", "data")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = simple_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(5):  # a few steps: running statistics away from 0 / 1
        x = torch.rand(16, 3, 32, 32)
        y = torch.randint(0, 10, (16,))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    x = torch.rand(4, 3, 32, 32)
    with torch.no_grad():
        logits = model(x)
    torch.save(model.state_dict(), os.path.join(out, "simple_cnn.pt"))
    np.save(os.path.join(out, "simple_cnn_input.npy"), x.numpy())
    np.save(os.path.join(out, "simple_cnn_logits.npy"), logits.numpy())
    n = sum(p.numel() for p in model.parameters())
    print(f"simple_cnn: {n} parameters, {os.path.getsize(os.path.join(out, 'simple_cnn.pt'))} bytes")


if __name__ == "__main__":
    main()
