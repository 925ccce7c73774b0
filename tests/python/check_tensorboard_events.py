#!/usr/bin/env python3
"""Independent check of keel's TensorBoard event files.

Runs the writer program (argv[1]) into a fresh directory, compiles TensorBoard's .proto files
(argv[2], the import root) with protoc into Python modules, then reads every record with its own
TFRecord framing and CRC-32C code and the protobuf Python runtime, and checks each field the
writer is known to have written. Exits 77 (skipped) only when python3-protobuf or protoc is not
installed.
"""
import glob
import importlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def skip(why):
    print(f"skipped: {why}")
    sys.exit(77)


try:
    import google.protobuf  # noqa: F401
except ImportError:
    skip("python3-protobuf is not installed")
if shutil.which("protoc") is None:
    skip("protoc (protobuf-compiler) is not installed")


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        blob = f.read()
    pos = 0
    while pos < len(blob):
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        assert length_crc == masked(header), f"length CRC mismatch at offset {pos}"
        data = blob[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[pos + 12 + length:pos + 16 + length])
        assert data_crc == masked(data), f"data CRC mismatch at offset {pos}"
        yield data
        pos += 16 + length
    assert pos == len(blob), "trailing bytes after the last record"


def main():
    writer, proto_root = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp()
    try:
        out = os.path.join(work, "py")
        os.makedirs(out)
        protos = glob.glob(os.path.join(proto_root, "tensorboard", "compat", "proto", "*.proto"))
        subprocess.run(["protoc", f"-I{proto_root}", f"--python_out={out}"] + protos, check=True)
        sys.path.insert(0, out)
        event_pb2 = importlib.import_module("tensorboard.compat.proto.event_pb2")

        logdir = os.path.join(work, "logs")
        subprocess.run([writer, logdir], check=True)
        files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
        assert len(files) == 1, files
        events = []
        for data in records(files[0]):
            e = event_pb2.Event()
            e.ParseFromString(data)
            events.append(e)
        assert events[0].file_version == "brain.Event:2"
        by_step = {e.step: e for e in events[1:]}

        v = by_step[3].summary.value[0]
        assert v.tag == "loss" and abs(v.simple_value - 0.25) < 1e-7, v

        h = by_step[4].summary.value[0].histo
        assert by_step[4].summary.value[0].tag == "weights"
        assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (1, 10, 5, 18, 118), h
        assert list(h.bucket_limit) == [4, 7, 10] and list(h.bucket) == [4, 0, 1], h

        t = by_step[5].summary.value[0]
        assert t.tag == "note" and t.metadata.plugin_data.plugin_name == "text"
        assert list(t.tensor.string_val) == [b"hello tensorboard"], t.tensor

        i = by_step[6].summary.value[0]
        assert i.tag == "pixels/image"
        assert (i.image.height, i.image.width, i.image.colorspace) == (2, 2, 1), i.image
        assert i.image.encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"
        print(f"ok: {len(events)} events in {os.path.basename(files[0])} parsed and checked")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
