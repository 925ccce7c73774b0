"""onnx.checker (python3-onnx) on every model the C++ test wrote: the folder's index.json lists
them. Exit 0 when all pass, 1 on the first invalid model, 77 when the onnx module is missing."""
import json
import os
import sys

try:
    import onnx
    import onnx.checker
except ImportError:
    print("onnx is not installed")
    sys.exit(77)


def main(folder):
    with open(os.path.join(folder, "index.json"), encoding="utf-8") as f:
        index = json.load(f)
    for case in index:
        model = onnx.load(os.path.join(folder, case["model"]))
        onnx.checker.check_model(model, full_check=True)  # full_check adds shape inference
        ops = sorted({n.op_type for n in model.graph.node})
        print(f"ok {case['name']}: opset {model.opset_import[0].version}, {len(model.graph.node)} nodes: {' '.join(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
