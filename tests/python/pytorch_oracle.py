#!/usr/bin/env python3
"""PyTorch as the oracle of keel's torch.save files and state_dict bridge.

    pytorch_oracle.py TEST_IO_PYTORCH

1. torch writes state_dicts (Linear, Conv2d + BatchNorm2d, Conv1d, LSTM, GRU, Embedding +
   LayerNorm models; tensors of every dtype; a shared storage with views; a non-contiguous
   tensor) and the inputs and outputs of each model (.npy) into a fresh folder;
2. keel's hidden [.pytorch_oracle] test cases (run from TEST_IO_PYTORCH with the folder in
   KEEL_PYTORCH_ORACLE_DIR) load them, predict, compare to 1e-5, and write files of their own;
3. torch.load(..., weights_only=True) reads those back here and checks every value, and loads
   keel's pytorch_state_dict into the torch model, whose prediction must match keel's.
Exits 77 (skipped) only when torch or numpy cannot be imported.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:  # the tool is genuinely missing
    print(f"skipped: {e}")
    sys.exit(77)


def save_model(folder, name, model, x, y):
    torch.save(model.state_dict(), os.path.join(folder, f"{name}.pt"))
    np.save(os.path.join(folder, f"{name}_x.npy"), x)
    np.save(os.path.join(folder, f"{name}_y.npy"), y)


def write_models(d):
    torch.manual_seed(0)
    with torch.no_grad():
        # Linear: keel Sequential Dense(3), ReLU, Dense(2).
        m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).eval()
        x = torch.randn(5, 4)
        save_model(d, "linear", m, x.numpy(), m(x).numpy())

        # Conv2d + BatchNorm2d (eval, non-trivial running stats) + ReLU; keel works in NHWC, so
        # the .npy files hold NHWC arrays: x.permute(0, 2, 3, 1).
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4, eps=1e-3),
                                torch.nn.ReLU()).eval()
        m[1].running_mean.copy_(torch.randn(4) * 0.1)
        m[1].running_var.copy_(torch.rand(4) + 0.5)
        m[1].weight.copy_(torch.rand(4) + 0.5)
        m[1].bias.copy_(torch.randn(4) * 0.1)
        m[1].num_batches_tracked.fill_(7)
        x = torch.randn(2, 3, 6, 5)
        save_model(d, "conv2d", m, x.permute(0, 2, 3, 1).numpy(), m(x).permute(0, 2, 3, 1).numpy())

        # Conv1d with stride 2 (NCW in torch, NWC in keel).
        m = torch.nn.Sequential(torch.nn.Conv1d(3, 5, 3, stride=2)).eval()
        x = torch.randn(2, 3, 9)
        save_model(d, "conv1d", m, x.permute(0, 2, 1).numpy(), m(x).permute(0, 2, 1).numpy())

        # LSTM and GRU (batch_first): keel's output is the last hidden state h_n.
        for name, cls in (("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU)):
            rnn = cls(3, 4, batch_first=True)
            m = torch.nn.Sequential(rnn).eval()
            x = torch.randn(2, 5, 3)
            out, _ = rnn(x)
            save_model(d, name, m, x.numpy(), out[:, -1, :].numpy())
            # Bidirectional: every step's [forward, backward] outputs (keel's Bidirectional with
            # return_sequences and merge_mode "concat").
            birnn = cls(3, 4, batch_first=True, bidirectional=True)
            m = torch.nn.Sequential(birnn).eval()
            out, _ = birnn(x)
            save_model(d, "bi" + name, m, x.numpy(), out.numpy())

        # Two-layer RNNs (num_layers=2): keel's two stacked layers. LSTM + Linear on the last
        # step; a bidirectional GRU's every step.
        lstm2 = torch.nn.LSTM(3, 4, num_layers=2, batch_first=True)
        fc = torch.nn.Linear(4, 2)
        m = torch.nn.Sequential(lstm2, fc).eval()  # a holder of the names "0.*_l1", "1.weight"
        out, _ = lstm2(x)
        save_model(d, "lstm2", m, x.numpy(), fc(out[:, -1, :]).numpy())
        gru2 = torch.nn.GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True)
        m = torch.nn.Sequential(gru2).eval()
        out, _ = gru2(x)
        save_model(d, "bigru2", m, x.numpy(), out.numpy())

        # Embedding + LayerNorm: ids in, normalised vectors out.
        m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.LayerNorm(4, eps=1e-3)).eval()
        m[1].weight.copy_(torch.rand(4) + 0.5)
        m[1].bias.copy_(torch.randn(4))
        ids = torch.tensor([[1, 2, 9], [0, 5, 5]])
        save_model(d, "embedding", m, ids.numpy().astype(np.int64), m(ids).numpy())

    # Tensors of every dtype, and views: values the C++ test derives by hand.
    base = torch.arange(12, dtype=torch.float32)
    tensors = {
        "f32": torch.tensor([1.5, -2.0, 3.25]),
        "f64": torch.tensor([[1.0, 2.0], [3.0, 1e300]], dtype=torch.float64),
        "f16": torch.tensor([0.5, -1.0, 65504.0], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -2.5, 256.0], dtype=torch.bfloat16),
        "i64": torch.tensor([-1, 2**40, 3], dtype=torch.int64),
        "i32": torch.tensor([-7, 8], dtype=torch.int32),
        "i8": torch.tensor([-128, 127, 0], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 7], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(42.0),
        "empty": torch.zeros(0, 3),
        # One storage of 12 floats shared by three tensors:
        "base": base.view(3, 4),
        "view": base.view(3, 4)[1:, 1:3],   # offset 5, size (2, 2), stride (4, 1): [[5, 6], [9, 10]]
        "t": base.view(3, 4).t(),           # offset 0, size (4, 3), stride (1, 4): non-contiguous
        "param": torch.nn.Parameter(torch.tensor([[1.0, 2.0]])),  # _rebuild_parameter
    }
    torch.save(tensors, os.path.join(d, "dtypes.pt"))


def check_keel_files(d):
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    t = torch.load(os.path.join(d, "keel_dtypes.pt"), weights_only=True)
    expect(list(t.keys()) == sorted(t.keys()), f"keys not in keel's (sorted) order: {list(t.keys())}")
    want = {
        "a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "b": torch.tensor([1, -2, 2**40], dtype=torch.int64),
        "c": torch.tensor([True, False]),
        "d": torch.tensor([0.5, -2.0], dtype=torch.float16),
        "e": torch.tensor([1.0, 3.0], dtype=torch.bfloat16),
        "f": torch.tensor([1e300, -1.0], dtype=torch.float64),
        "g": torch.tensor([-5, 6], dtype=torch.int32),
        "h": torch.tensor([200, 3], dtype=torch.uint8),
        "s": torch.tensor(7.0),
        "z": torch.zeros(0, 2),
    }
    expect(set(t.keys()) == set(want.keys()), f"keys {sorted(t.keys())} != {sorted(want.keys())}")
    for k, v in want.items():
        if k in t:
            expect(t[k].dtype == v.dtype and t[k].shape == v.shape and torch.equal(t[k], v),
                   f"{k}: got {t[k]!r}, want {v!r}")

    # keel's pytorch_state_dict of a Dense/Conv/BN/LSTM model, loaded into the torch model.
    sd = torch.load(os.path.join(d, "keel_linear.pt"), weights_only=True)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).eval()
    m.load_state_dict(sd, strict=True)
    x = torch.from_numpy(np.load(os.path.join(d, "keel_linear_x.npy")))
    y = np.load(os.path.join(d, "keel_linear_y.npy"))
    with torch.no_grad():
        diff = float(np.abs(m(x).numpy() - y).max())
    expect(diff < 1e-5, f"keel_linear: torch's prediction differs from keel's by {diff}")

    # keel: Input [3, 4, 3] (NHWC) -> Conv2D(4, 3) [1, 2, 4] -> BatchNormalization -> Reshape [2, 4]
    # -> LSTM(2); torch: the same, Flatten's index holding keel's Reshape (no weights).
    sd = torch.load(os.path.join(d, "keel_rnn.pt"), weights_only=True)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4, eps=1e-3), torch.nn.Flatten(),
                            torch.nn.LSTM(4, 2, batch_first=True)).eval()
    m.load_state_dict(sd, strict=True)
    expect(int(sd["1.num_batches_tracked"]) == 0 and sd["1.num_batches_tracked"].dtype == torch.int64,
           "num_batches_tracked must be an int64 0")
    with torch.no_grad():
        x = torch.from_numpy(np.load(os.path.join(d, "keel_rnn_x.npy")))  # NHWC [2, 3, 4, 3]
        f = m[1](m[0](x.permute(0, 3, 1, 2)))                            # NCHW [2, 4, 1, 2]
        seq = f.permute(0, 2, 3, 1).reshape(x.shape[0], 2, 4)            # keel's Reshape of NHWC
        out, _ = m[3](seq)
        diff = float(np.abs(out[:, -1].numpy() - np.load(os.path.join(d, "keel_rnn_y.npy"))).max())
        expect(diff < 1e-5, f"keel_rnn: torch's prediction differs from keel's by {diff}")

    sd = torch.load(os.path.join(d, "keel_gru.pt"), weights_only=True)
    m = torch.nn.Sequential(torch.nn.GRU(4, 3, batch_first=True)).eval()
    m.load_state_dict(sd, strict=True)
    with torch.no_grad():
        out, _ = m[0](torch.from_numpy(np.load(os.path.join(d, "keel_gru_x.npy"))))
        diff = float(np.abs(out[:, -1].numpy() - np.load(os.path.join(d, "keel_gru_y.npy"))).max())
        expect(diff < 1e-5, f"keel_gru: torch's prediction differs from keel's by {diff}")
    # keel's two stacked LSTMs + Dense, written with stack_recurrent: nn.LSTM(num_layers=2) + Linear.
    sd = torch.load(os.path.join(d, "keel_lstm2.pt"), weights_only=True)
    lstm2, fc = torch.nn.LSTM(3, 4, num_layers=2, batch_first=True), torch.nn.Linear(4, 2)
    torch.nn.Sequential(lstm2, fc).load_state_dict(sd, strict=True)
    with torch.no_grad():
        out, _ = lstm2(torch.from_numpy(np.load(os.path.join(d, "keel_lstm2_x.npy"))))
        diff = float(np.abs(fc(out[:, -1]).numpy() - np.load(os.path.join(d, "keel_lstm2_y.npy"))).max())
        expect(diff < 1e-5, f"keel_lstm2: torch's prediction differs from keel's by {diff}")
    return failures


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory(prefix="keel_pytorch_oracle_") as d:
        write_models(d)
        env = dict(os.environ, KEEL_PYTORCH_ORACLE_DIR=d, KEEL_DEFAULT_DEVICE="cpu")
        r = subprocess.run([sys.argv[1], "[.pytorch_oracle]"], env=env)
        if r.returncode != 0:
            print(f"keel's oracle test cases failed (exit {r.returncode})")
            return 1
        failures = check_keel_files(d)
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("pytorch oracle: torch and keel agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
