// Runs every model the C++ test wrote (index.json in the folder given as argv[2]) with ONNX
// Runtime and compares its outputs with keel's predictions: |ort - keel| <= 1e-5 + 1e-5 |keel|,
// at each batch size written (1 and 3: the batch axis is dynamic). Exit 0 when all match.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

function readRaw(file, dtype) {
  const buf = fs.readFileSync(file);
  const bytes = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  return dtype === 'int32' ? new Int32Array(bytes) : new Float32Array(bytes);
}

async function main() {
  const dir = process.argv[2];
  const index = JSON.parse(fs.readFileSync(path.join(dir, 'index.json'), 'utf8'));
  let failures = 0;
  for (const c of index) {
    const runner = await ort.InferenceSession.create(path.join(dir, c.model));
    for (const run of c.runs) {
      const feeds = {};
      for (const i of run.inputs) feeds[i.name] = new ort.Tensor(i.dtype, readRaw(path.join(dir, i.file), i.dtype), i.shape);
      const results = await runner.run(feeds);
      for (const o of run.outputs) {
        const want = readRaw(path.join(dir, o.file), 'float32');
        const got = results[o.name];
        let worst = 0;
        let bad = got === undefined || got.data.length !== want.length ||
                  JSON.stringify(Array.from(got.dims)) !== JSON.stringify(o.shape);
        if (!bad) {
          for (let k = 0; k < want.length; ++k) {
            const err = Math.abs(got.data[k] - want[k]);
            worst = Math.max(worst, err);
            if (!(err <= 1e-5 + 1e-5 * Math.abs(want[k]))) bad = true;
          }
        }
        const what = `${c.name} batch ${run.batch} output ${o.name}`;
        if (bad) {
          ++failures;
          console.log(`FAIL ${what}: max |diff| ${worst}` + (got ? ` dims ${Array.from(got.dims)} vs ${o.shape}` : ' missing'));
        } else {
          console.log(`ok   ${what}: max |diff| ${worst.toExponential(2)} (${c.layout_transposes} layout Transposes)`);
        }
      }
    }
  }
  if (failures) {
    console.log(`${failures} output(s) differ`);
    process.exit(1);
  }
}

main().catch((e) => { console.log(`error: ${e.stack || e}`); process.exit(1); });
