#!/usr/bin/env python3
"""An independent check of keel's Keras files with h5py, numpy and json (no Keras needed).

(a) Writes files in the layouts Keras writes them -- a Keras 3 .keras zip (config.json as
    serialize_keras_object gives it, model.weights.h5 in H5IOStore's "layers/<name>/vars/<i>"
    layout, keras/src/saving/saving_lib.py) and a tf.keras 2 legacy .h5 (model_config,
    model_weights/layer_names/weight_names, tf_keras/src/saving/legacy/hdf5_format.py) -- with
    weights from numpy, has keel predict on them and compares with the forward pass computed here
    (to 1e-5).
(b) Has keel save a model as .keras, .h5, .weights.h5 and weights .h5 and reads them back here:
    the groups, attributes and weight values must be Keras'.

usage: keras_files_check.py <keras_files_tool>
Exits 77 when h5py or numpy is missing (the test is then skipped), 1 on a mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile
import zipfile

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("skipped:", e)
    sys.exit(77)

TOOL = sys.argv[1]
rng = np.random.default_rng(7)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def policy(name="float32"):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name}, "registered_name": None}


def init(cls, config=None):
    return {"module": "keras.initializers", "class_name": cls,
            "config": config if config is not None else {"seed": None}, "registered_name": None}


def dense3(name, units, activation, input_dim):
    # keras/src/layers/core/dense.py get_config, as serialize_keras_object wraps it
    return {"module": "keras.layers", "class_name": "Dense", "registered_name": None,
            "build_config": {"input_shape": [None, input_dim]},
            "config": {"name": name, "trainable": True, "dtype": policy(), "units": units,
                       "activation": activation, "use_bias": True,
                       "kernel_initializer": init("GlorotUniform"), "bias_initializer": init("Zeros", {}),
                       "kernel_regularizer": None, "bias_regularizer": None, "kernel_constraint": None,
                       "bias_constraint": None}}


def input3(name, shape):
    return {"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
            "config": {"batch_shape": [None] + shape, "dtype": "float32", "sparse": False, "name": name}}


def write_keras(path, model_config, build_shape, weights, compile_config=None, optimizer_vars=()):
    """weights: {"layers/dense": [arrays]} -> H5IOStore groups; optimizer_vars: "optimizer/vars"."""
    tmp = path + ".weights.h5"
    with h5py.File(tmp, "w") as f:
        f.create_group("vars")
        f.create_group("layers")
        for p, arrays in weights.items():
            g = f.create_group(p).create_group("vars") if p else f["vars"]
            for i, a in enumerate(arrays):
                g[str(i)] = a
        ov = f.create_group("optimizer").create_group("vars")
        for i, a in enumerate(optimizer_vars):
            ov[str(i)] = a
    top = {"module": "keras", "class_name": model_config["class_name"], "config": model_config["config"],
           "registered_name": None, "build_config": {"input_shape": build_shape}, "compile_config": compile_config}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.3.3", "date_saved": "2024-05-01@12:00:00"}))
        z.writestr("config.json", json.dumps(top))
        with open(tmp, "rb") as w:
            z.writestr("model.weights.h5", w.read())
    os.remove(tmp)


def predict(model_path, x, work):
    xp, yp = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xp, x)
    r = subprocess.run([TOOL, "predict", model_path, xp, yp], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        failures.append(f"keel could not load {os.path.basename(model_path)}: {r.stderr.strip()}")
        print("FAIL:", r.stderr.strip())
        return None
    return np.load(yp)


def relu(v):
    return np.maximum(v, 0)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


with tempfile.TemporaryDirectory() as work:
    # ---- (a1) a Keras 3 Sequential MLP ----------------------------------------------------------
    w1, b1, w2, b2 = f32(4, 3), f32(3), f32(3, 2), f32(2)
    seq = {"class_name": "Sequential",
           "config": {"name": "sequential", "trainable": True, "dtype": policy(),
                      "layers": [input3("input_layer", [4]), dense3("dense", 3, "relu", 4),
                                 dense3("dense_1", 2, "linear", 3)]}}
    p = os.path.join(work, "mlp.keras")
    write_keras(p, seq, [None, 4], {"": [], "layers/dense": [w1, b1], "layers/dense_1": [w2, b2]})
    x = f32(5, 4)
    got = predict(p, x, work)
    want = relu(x @ w1 + b1) @ w2 + b2
    if got is not None:
        check(got.shape == want.shape and np.allclose(got, want, atol=1e-5), f"mlp.keras predicts {got} != {want}")

    # ---- (a2) a Keras 3 functional LSTM: the variables live in layers/lstm/cell/vars -------------
    units, steps, feat = 3, 5, 2
    k, rk, bias, wd, bd = f32(feat, 4 * units), f32(units, 4 * units), f32(4 * units), f32(units, 1), f32(1)
    lstm_cfg = {"module": "keras.layers", "class_name": "LSTM", "registered_name": None,
                "build_config": {"input_shape": [None, steps, feat]},
                "config": {"name": "lstm", "trainable": True, "dtype": policy(), "return_sequences": False,
                           "return_state": False, "go_backwards": False, "stateful": False, "unroll": False,
                           "zero_output_for_mask": False, "units": units, "activation": "tanh",
                           "recurrent_activation": "sigmoid", "use_bias": True,
                           "kernel_initializer": init("GlorotUniform"),
                           "recurrent_initializer": init("Orthogonal", {"gain": 1.0, "seed": None}),
                           "bias_initializer": init("Zeros", {}), "unit_forget_bias": True,
                           "kernel_regularizer": None, "recurrent_regularizer": None, "bias_regularizer": None,
                           "activity_regularizer": None, "kernel_constraint": None, "recurrent_constraint": None,
                           "bias_constraint": None, "dropout": 0.0, "recurrent_dropout": 0.0, "seed": None}}

    def ref(layer, shape):
        return {"class_name": "__keras_tensor__",
                "config": {"shape": shape, "dtype": "float32", "keras_history": [layer, 0, 0]}}

    inp = input3("input_layer", [steps, feat])
    inp.update({"name": "input_layer", "inbound_nodes": []})
    lstm_cfg.update({"name": "lstm", "inbound_nodes": [{"args": [ref("input_layer", [None, steps, feat])], "kwargs": {"training": False, "mask": None}}]})
    out = dense3("dense", 1, "linear", units)
    out.update({"name": "dense", "inbound_nodes": [{"args": [ref("lstm", [None, units])], "kwargs": {}}]})
    fn = {"class_name": "Functional",
          "config": {"name": "functional", "trainable": True, "layers": [inp, lstm_cfg, out],
                     "input_layers": [["input_layer", 0, 0]], "output_layers": [["dense", 0, 0]]}}
    p = os.path.join(work, "lstm.keras")
    write_keras(p, fn, [None, steps, feat],
                {"": [], "layers/input_layer": [], "layers/lstm": [], "layers/lstm/cell": [k, rk, bias],
                 "layers/dense": [wd, bd]})
    x = f32(2, steps, feat)
    # Keras' LSTMCell: z = x k + h rk + b, gates i, f, c, o in that order.
    h = np.zeros((2, units), np.float32)
    c = np.zeros((2, units), np.float32)
    for t in range(steps):
        z = x[:, t] @ k + h @ rk + bias
        i, fg, cc, o = (z[:, j * units:(j + 1) * units] for j in range(4))
        c = sigmoid(fg) * c + sigmoid(i) * np.tanh(cc)
        h = sigmoid(o) * np.tanh(c)
    want = h @ wd + bd
    got = predict(p, x, work)
    if got is not None:
        check(np.allclose(got, want, atol=1e-5), f"lstm.keras predicts {got} != {want}")

    # ---- (a3) a tf.keras 2 legacy functional .h5 with BatchNormalization ------------------------
    gamma, beta, mean, var = f32(3), f32(3), f32(3), np.abs(f32(3)) + 0.5

    def dense2(name, units, activation, inbound):
        return {"class_name": "Dense", "name": name, "inbound_nodes": [[[inbound, 0, 0, {}]]],
                "config": {"name": name, "trainable": True, "dtype": "float32", "units": units,
                           "activation": activation, "use_bias": True,
                           "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
                           "bias_initializer": {"class_name": "Zeros", "config": {}},
                           "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
                           "kernel_constraint": None, "bias_constraint": None}}

    legacy = {"class_name": "Functional", "config": {"name": "model", "layers": [
        {"class_name": "InputLayer", "name": "input_1", "inbound_nodes": [],
         "config": {"batch_input_shape": [None, 4], "dtype": "float32", "sparse": False, "ragged": False,
                    "name": "input_1"}},
        dense2("d1", 3, "relu", "input_1"),
        {"class_name": "BatchNormalization", "name": "bn", "inbound_nodes": [[["d1", 0, 0, {}]]],
         "config": {"name": "bn", "trainable": True, "dtype": "float32", "axis": [1], "momentum": 0.99,
                    "epsilon": 0.001, "center": True, "scale": True,
                    "beta_initializer": {"class_name": "Zeros", "config": {}},
                    "gamma_initializer": {"class_name": "Ones", "config": {}},
                    "moving_mean_initializer": {"class_name": "Zeros", "config": {}},
                    "moving_variance_initializer": {"class_name": "Ones", "config": {}},
                    "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None,
                    "gamma_constraint": None}},
        dense2("d2", 2, "linear", "bn")],
        "input_layers": [["input_1", 0, 0]], "output_layers": [["d2", 0, 0]]}}
    p = os.path.join(work, "legacy.h5")
    with h5py.File(p, "w") as f:
        f.attrs["model_config"] = json.dumps(legacy).encode("utf8")
        f.attrs["keras_version"] = b"2.15.0"
        f.attrs["backend"] = b"tensorflow"
        mw = f.create_group("model_weights")
        mw.attrs["layer_names"] = np.array([b"input_1", b"d1", b"bn", b"d2"])
        mw.attrs["backend"] = b"tensorflow"
        mw.attrs["keras_version"] = b"2.15.0"
        layers = {"input_1": [], "d1": [("d1/kernel:0", w1), ("d1/bias:0", b1)],
                  "bn": [("bn/gamma:0", gamma), ("bn/beta:0", beta), ("bn/moving_mean:0", mean),
                         ("bn/moving_variance:0", var)],
                  "d2": [("d2/kernel:0", w2), ("d2/bias:0", b2)]}
        for name, ws in layers.items():
            g = mw.create_group(name)
            g.attrs["weight_names"] = np.array([n.encode("utf8") for n, _ in ws])  # [] -> float64, as Keras
            for n, a in ws:
                g.create_dataset(n, data=a)
    x = f32(6, 4)
    hid = relu(x @ w1 + b1)
    want = ((hid - mean) / np.sqrt(var + 0.001) * gamma + beta) @ w2 + b2  # inference-mode BN
    got = predict(p, x, work)
    if got is not None:
        check(np.allclose(got, want, atol=1e-5), f"legacy.h5 predicts {got} != {want}")

    # ---- (b) keel's files read here -------------------------------------------------------------
    r = subprocess.run([TOOL, "save", work], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"keel could not save: {r.stderr.strip()}")
    if r.returncode == 0:
        w = [np.load(os.path.join(work, f"w{i}.npy")) for i in range(4)]
        with zipfile.ZipFile(os.path.join(work, "m.keras")) as z:
            names = set(z.namelist())
            check({"config.json", "metadata.json", "model.weights.h5"} <= names, f"m.keras members {names}")
            cfg = json.loads(z.read("config.json"))
            meta = json.loads(z.read("metadata.json"))
            check(cfg["module"] == "keras" and cfg["class_name"] == "Sequential", "m.keras config.json class")
            check(cfg["build_config"]["input_shape"] == [None, 4], "m.keras build_config")
            d = cfg["config"]["layers"][1]
            check(d["class_name"] == "Dense" and d["module"] == "keras.layers", "m.keras Dense entry")
            check(d["config"]["dtype"] == policy(), f"m.keras Dense dtype {d['config']['dtype']}")
            check(d["config"]["kernel_initializer"] == init("GlorotUniform"), "m.keras kernel_initializer")
            check(meta["keras_version"].startswith("3."), "m.keras metadata keras_version")
            with open(os.path.join(work, "inner.h5"), "wb") as out:
                out.write(z.read("model.weights.h5"))
        for path in (os.path.join(work, "inner.h5"), os.path.join(work, "w.weights.h5")):
            with h5py.File(path, "r") as f:
                check("vars" in f, f"{path}: no root vars group")
                for j, layer in enumerate(["dense", "dense_1"]):
                    g = f[f"layers/{layer}/vars"]
                    check(sorted(g.keys()) == ["0", "1"], f"{path}: layers/{layer}/vars holds {list(g.keys())}")
                    check(np.array_equal(g["0"][()], w[2 * j]) and np.array_equal(g["1"][()], w[2 * j + 1]),
                          f"{path}: layers/{layer} values")
        with h5py.File(os.path.join(work, "m.h5"), "r") as f:
            mc = json.loads(f.attrs["model_config"])
            check(mc["class_name"] == "Sequential", "m.h5 model_config class")
            check(mc["config"]["layers"][0]["config"]["batch_input_shape"] == [None, 4], "m.h5 batch_input_shape")
            check(f.attrs["backend"] == b"tensorflow" and f.attrs["keras_version"].startswith(b"2."), "m.h5 attrs")
            mw = f["model_weights"]
            lnames = [n.decode() for n in mw.attrs["layer_names"]]
            check(len(lnames) == 2, f"m.h5 layer_names {lnames}")
            for j, ln in enumerate(lnames):
                wn = [n.decode() for n in mw[ln].attrs["weight_names"]]
                check(wn == [f"{ln}/kernel:0", f"{ln}/bias:0"], f"m.h5 {ln} weight_names {wn}")
                check(np.array_equal(mw[ln][wn[0]][()], w[2 * j]) and np.array_equal(mw[ln][wn[1]][()], w[2 * j + 1]),
                      f"m.h5 {ln} values")
        with h5py.File(os.path.join(work, "w.h5"), "r") as f:
            lnames = [n.decode() for n in f.attrs["layer_names"]]
            check(len(lnames) == 2 and all(ln in f for ln in lnames), f"w.h5 layer_names {lnames}")
            wn = [n.decode() for n in f[lnames[1]].attrs["weight_names"]]
            check(np.array_equal(f[lnames[1]][wn[0]][()], w[2]), "w.h5 values")

    # ---- (c) optimizer variables in Keras' order ("optimizer/vars/<i>") --------------------------------
    # Keras 3 (keras/src/optimizers): iteration, learning_rate, then the slots of each variable in
    # turn (Adam: momentum, velocity), amsgrad's velocity_hat for all variables after them; RMSprop
    # all velocities, then all momentums, then all average gradients.
    def keel_name(weight, slot):
        return f"{weight.replace('/', '__')}__{slot}"


    def expected_order(optimizer, weights):
        order = ["iteration", "learning_rate"]
        if optimizer == "Adam":
            for w in weights:
                order += [keel_name(w, "momentum"), keel_name(w, "velocity")]
            order += [keel_name(w, "velocity_hat") for w in weights]
        else:  # RMSprop(momentum > 0, centered)
            for slot in ("velocity", "momentum", "average_gradient"):
                order += [keel_name(w, slot) for w in weights]
        return order


    weights = ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    shapes = {"dense/kernel": (4, 3), "dense/bias": (3,), "dense_1/kernel": (3, 2), "dense_1/bias": (2,)}

    def saved_optimizer_vars(command, keras_file):
        """Has the tool train and save a model; its "optimizer/vars" as {"0": array, ...}, or None."""
        r = subprocess.run([TOOL, command, work], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"keel could not save a trained model ({command}): {r.stderr.strip()}")
        if r.returncode != 0:
            return None
        with zipfile.ZipFile(os.path.join(work, keras_file)) as z:
            with open(os.path.join(work, "inner.weights.h5"), "wb") as out:
                out.write(z.read("model.weights.h5"))
        with h5py.File(os.path.join(work, "inner.weights.h5"), "r") as f:
            return {k: v[()] for k, v in f["optimizer/vars"].items()}

    # keel -> Keras: a trained Adam(amsgrad)'s variables, in Keras' order, with keel's values.
    opt_dir = os.path.join(work, "opt")
    g = saved_optimizer_vars("save_trained", "m_opt.keras")
    if g is not None:
        order = expected_order("Adam", weights)
        check(sorted(g.keys(), key=int) == [str(i) for i in range(len(order))],
              f"m_opt.keras optimizer/vars holds {sorted(g.keys(), key=int)}, Keras' Adam(amsgrad) has {len(order)}")
        for i, name in enumerate(order):
            if str(i) not in g:
                continue
            want = np.load(os.path.join(opt_dir, name + ".npy"))
            check(g[str(i)].shape == want.shape and np.array_equal(g[str(i)][()], want),
                  f"optimizer/vars/{i} is not keel's {name}")
        check(g["0"].dtype == np.int64 and int(g["0"][()]) == 3, f"iteration {g['0'][()]} ({g['0'].dtype}), want 3")

    def loads_optimizer(path, label, names, values):
        """Has keel load `path` compiled: its optimizer must hold values[name] for each name, with no warning."""
        out = os.path.join(work, f"keel_{label}")
        os.makedirs(out, exist_ok=True)
        r = subprocess.run([TOOL, "optimizer", path, out], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"keel could not load {os.path.basename(path)} compiled: {r.stderr.strip()}")
        check("fresh state" not in r.stderr and "skipping" not in r.stderr.lower(), f"{label}: {r.stderr.strip()}")
        if r.returncode == 0:
            for name in names:
                f = os.path.join(out, name + ".npy")
                got = np.load(f) if os.path.exists(f) else None
                check(got is not None and np.array_equal(got.astype(values[name].dtype), values[name]),
                      f"{label}: keel's {name} is {got}, the file's {values[name]}")

    # Keras -> keel: files with the optimizer variables Keras writes, loaded into keel's optimizer.
    for optimizer, config in (("Adam", {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07, "amsgrad": True}),
                              ("RMSprop", {"rho": 0.9, "momentum": 0.5, "epsilon": 1e-07, "centered": True})):
        common = {"name": optimizer.lower(), "learning_rate": 0.005, "weight_decay": None, "clipnorm": None,
                  "global_clipnorm": None, "clipvalue": None, "use_ema": False, "ema_momentum": 0.99,
                  "ema_overwrite_frequency": None, "loss_scale_factor": None, "gradient_accumulation_steps": None}
        compile_config = {"optimizer": {"module": "keras.optimizers", "class_name": optimizer,
                                        "config": {**common, **config}, "registered_name": None},
                          "loss": "mean_squared_error", "loss_weights": None, "metrics": None, "weighted_metrics": None,
                          "run_eagerly": False, "steps_per_execution": 1, "jit_compile": False}
        model_config = {"class_name": "Sequential", "config": {"name": "sequential", "trainable": True, "dtype": policy(),
                        "layers": [input3("input_layer", [4]), dense3("dense", 3, "relu", 4), dense3("dense_1", 2, "linear", 3)]}}
        order = expected_order(optimizer, weights)
        values = {"iteration": np.array(7, dtype=np.int64), "learning_rate": np.array(0.005, dtype=np.float32)}
        for name in order[2:]:
            w = "/".join(name.split("__")[:2])  # "dense__kernel__momentum" -> dense/kernel
            values[name] = rng.uniform(0.1, 1.0, shapes[w]).astype(np.float32)
        path = os.path.join(work, f"keras_{optimizer}.keras")
        write_keras(path, model_config, [None, 4],
                    {"layers/dense": [f32(4, 3), f32(3)], "layers/dense_1": [f32(3, 2), f32(2)]},
                    compile_config=compile_config, optimizer_vars=[values[n] for n in order])
        loads_optimizer(path, optimizer, order, values)

    # A LossScaleOptimizer (keras/src/optimizers/loss_scale_optimizer.py): its own iteration and
    # learning_rate (0 and 0.0: the base constructor makes them, Keras never uses them), then
    # step_counter and dynamic_scale (made in build), then the inner optimizer's variables.
    lso_order = ["step_counter", "dynamic_scale"] + expected_order("Adam", weights)
    g = saved_optimizer_vars("save_trained_lso", "m_lso.keras")
    if g is not None:
        check(sorted(g.keys(), key=int) == [str(i) for i in range(2 + len(lso_order))],
              f"m_lso.keras optimizer/vars holds {sorted(g.keys(), key=int)}, Keras' has {2 + len(lso_order)}")
        check(g["0"].dtype == np.int64 and int(g["0"][()]) == 0 and float(g["1"][()]) == 0.0,
              f"the loss scale optimizer's own iteration and learning_rate: {g['0'][()]}, {g['1'][()]}")
        for i, name in enumerate(lso_order):
            if str(i + 2) not in g:
                continue
            want = np.load(os.path.join(work, "opt_lso", name + ".npy"))
            check(g[str(i + 2)].shape == want.shape and np.array_equal(g[str(i + 2)][()], want),
                  f"m_lso.keras optimizer/vars/{i + 2} is not keel's {name}")
        # 3 finite steps with dynamic_growth_steps 2: the scale doubled once, the counter at 1.
        check(int(g["2"][()]) == 1 and float(g["3"][()]) == 65536.0,
              f"step_counter {g['2'][()]}, dynamic_scale {g['3'][()]}")

    lso_config = {"module": "keras.optimizers", "class_name": "LossScaleOptimizer",
                  "config": {"name": "loss_scale_optimizer", "initial_scale": 32768.0, "dynamic_growth_steps": 2000,
                             "inner_optimizer": {"module": "keras.optimizers", "class_name": "Adam",
                                                 "config": {"name": "adam", "learning_rate": 0.005, "beta_1": 0.9,
                                                            "beta_2": 0.999, "epsilon": 1e-07, "amsgrad": True},
                                                 "registered_name": None}},
                  "registered_name": None}
    values = {"step_counter": np.array(17, dtype=np.int64), "dynamic_scale": np.array(1024.0, dtype=np.float32),
              "iteration": np.array(41, dtype=np.int64), "learning_rate": np.array(0.005, dtype=np.float32)}
    for name in lso_order[4:]:
        values[name] = rng.uniform(0.1, 1.0, shapes["/".join(name.split("__")[:2])]).astype(np.float32)
    path = os.path.join(work, "keras_lso.keras")
    write_keras(path, {"class_name": "Sequential", "config": {"name": "sequential", "trainable": True, "dtype": policy(),
                       "layers": [input3("input_layer", [4]), dense3("dense", 3, "relu", 4),
                                  dense3("dense_1", 2, "linear", 3)]}},
                [None, 4], {"layers/dense": [f32(4, 3), f32(3)], "layers/dense_1": [f32(3, 2), f32(2)]},
                compile_config={"optimizer": lso_config, "loss": "mean_squared_error", "loss_weights": None,
                                "metrics": None, "weighted_metrics": None, "run_eagerly": False,
                                "steps_per_execution": 1, "jit_compile": False},
                optimizer_vars=[np.array(0, dtype=np.int64), np.array(0.0, dtype=np.float32)] +
                               [values[n] for n in lso_order])
    loads_optimizer(path, "LossScaleOptimizer", lso_order, values)

    # ---- (d) tf.keras 2 optimizer_weights in a legacy .h5 --------------------------------------
    # tf_keras/src/saving/legacy/hdf5_format.py writes optimizer.weights under "optimizer_weights",
    # each dataset at its variable's name, the names in the attribute weight_names. TF 2.0-2.10's
    # OptimizerV2: "<opt>/iter:0", then the slots as add_slot makes them, "<opt>/<variable>/<slot>:0"
    # in _create_slots' order (Adam: every m, every v, every vhat; Nadam: momentum_cache first;
    # hyperparameters are not among them). TF 2.11-2.15's optimizers: "<opt>/<slot>/<variable>:0".
    # keel's names for Keras 2's slots: Adam m/v/vhat -> momentum/velocity/velocity_hat, Nadam's
    # momentum_cache -> u_product, RMSprop rms/mg -> velocity/average_gradient.
    def keras2_h5(path, optimizer, config, entries):
        mc = {"class_name": "Sequential", "config": {"name": "sequential", "layers": [
            {"class_name": "Dense", "config": {"name": "dense", "trainable": True, "batch_input_shape": [None, 4],
                                               "dtype": "float32", "units": 3, "activation": "relu", "use_bias": True}},
            {"class_name": "Dense", "config": {"name": "dense_1", "trainable": True, "dtype": "float32", "units": 2,
                                               "activation": "linear", "use_bias": True}}]}}
        training = {"loss": "mse", "metrics": None, "weighted_metrics": None, "loss_weights": None,
                    "optimizer_config": {"class_name": optimizer, "config": {"name": optimizer, "learning_rate": 0.005,
                                                                             **config}}}
        with h5py.File(path, "w") as f:
            f.attrs["model_config"] = json.dumps(mc).encode("utf8")
            f.attrs["training_config"] = json.dumps(training).encode("utf8")
            f.attrs["keras_version"] = b"2.10.0"
            f.attrs["backend"] = b"tensorflow"
            mw = f.create_group("model_weights")
            mw.attrs["layer_names"] = np.array([b"dense", b"dense_1"])
            for layer, (kshape, bshape) in (("dense", ((4, 3), (3,))), ("dense_1", ((3, 2), (2,)))):
                g = mw.create_group(layer)
                g.attrs["weight_names"] = np.array([f"{layer}/kernel:0".encode(), f"{layer}/bias:0".encode()])
                g.create_dataset(f"{layer}/kernel:0", data=f32(*kshape))
                g.create_dataset(f"{layer}/bias:0", data=f32(*bshape))
            og = f.create_group("optimizer_weights")
            og.attrs["weight_names"] = np.array([n.encode("utf8") for n, _ in entries])
            for n, v in entries:
                og.create_dataset(n, data=v)

    def slot_entries(fmt_name, slots):
        out = []
        for slot in slots:
            for w in weights:
                out.append((fmt_name(w, slot), rng.uniform(0.1, 1.0, shapes[w]).astype(np.float32)))
        return out

    cases = [
        ("Adam", {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07, "amsgrad": True},
         [("Adam/iter:0", np.array(9, dtype=np.int64))] +
         slot_entries(lambda w, s: f"Adam/{w}/{s}:0", ["m", "v", "vhat"]),
         {"m": "momentum", "v": "velocity", "vhat": "velocity_hat", "iter": "iteration"}),
        ("Nadam", {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07},
         [("Nadam/iter:0", np.array(4, dtype=np.int64)), ("Nadam/momentum_cache:0", np.array(0.61, dtype=np.float32))] +
         slot_entries(lambda w, s: f"Nadam/{w}/{s}:0", ["m", "v"]),
         {"m": "momentum", "v": "velocity", "iter": "iteration", "momentum_cache": "u_product"}),
        ("RMSprop", {"rho": 0.9, "momentum": 0.5, "epsilon": 1e-07, "centered": True},
         [("RMSprop/iteration:0", np.array(5, dtype=np.int64))] +
         slot_entries(lambda w, s: f"RMSprop/{s}/{w}:0", ["velocity", "momentum", "average_gradient"]),
         {"velocity": "velocity", "momentum": "momentum", "average_gradient": "average_gradient",
          "iteration": "iteration"}),
        ("RMSprop", {"rho": 0.9, "momentum": 0.5, "epsilon": 1e-07, "centered": True},
         [("RMSprop/iter:0", np.array(6, dtype=np.int64))] +
         slot_entries(lambda w, s: f"RMSprop/{w}/{s}:0", ["rms", "momentum", "mg"]),
         {"rms": "velocity", "momentum": "momentum", "mg": "average_gradient", "iter": "iteration"}),
    ]
    for case, (optimizer, config, entries, keel_slots) in enumerate(cases):
        path = os.path.join(work, f"tfkeras2_{case}_{optimizer}.h5")
        keras2_h5(path, optimizer, config, entries)
        out = os.path.join(work, f"keel2_{case}_{optimizer}")
        os.makedirs(out, exist_ok=True)
        r = subprocess.run([TOOL, "optimizer", path, out], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"keel could not load {os.path.basename(path)} compiled: {r.stderr.strip()}")
        check("fresh state" not in r.stderr, f"tf.keras 2 {optimizer}: {r.stderr.strip()}")
        if r.returncode != 0:
            continue
        for name, value in entries:
            parts = name[:-2].split("/")[1:]  # no ":0", no optimizer scope
            if len(parts) == 1:
                keel = keel_slots[parts[0]]
            elif parts[-1] in keel_slots:  # <variable>/<slot>
                keel = keel_name("/".join(parts[:-1]), keel_slots[parts[-1]])
            else:  # <slot>/<variable>
                keel = keel_name("/".join(parts[1:]), keel_slots[parts[0]])
            f = os.path.join(out, keel + ".npy")
            got = np.load(f) if os.path.exists(f) else None
            check(got is not None and np.allclose(got.astype(np.float64), value.astype(np.float64)),
                  f"tf.keras 2 {optimizer}: keel's {keel} is {got}, the file's {name} {value}")

    # A name that matches nothing of the optimizer's: Keras' warning, and a fresh optimizer.
    path = os.path.join(work, "tfkeras2_mismatch.h5")
    keras2_h5(path, "Adam", {}, [("Adam/iter:0", np.array(3, dtype=np.int64)),
                                 ("Adam/other/kernel/m:0", f32(4, 3))])
    out = os.path.join(work, "keel2_mismatch")
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([TOOL, "optimizer", path, out], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "fresh state" in r.stderr and "Adam/other/kernel/m:0" in r.stderr,
          f"a mismatched optimizer_weights: rc {r.returncode}, {r.stderr.strip()}")
    if r.returncode == 0:
        check(int(np.load(os.path.join(out, "iteration.npy"))) == 0, "a mismatched file still set the iteration")

    # A slot of the wrong shape: an IOError naming the dataset, not a silent load.
    path = os.path.join(work, "tfkeras2_badshape.h5")
    keras2_h5(path, "Adam", {}, [("Adam/iter:0", np.array(3, dtype=np.int64))] +
              [(f"Adam/{w}/{s}:0", f32(*((5, 5) if w == "dense/kernel" and s == "m" else shapes[w])))
               for s in ("m", "v") for w in weights])
    r = subprocess.run([TOOL, "optimizer", path, os.path.join(work, "keel2_badshape")], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 1 and "Adam/dense/kernel/m:0" in r.stderr and "shape" in r.stderr,
          f"a wrong-shaped optimizer weight: rc {r.returncode}, {r.stderr.strip()}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("keel's Keras files agree with h5py/numpy")
