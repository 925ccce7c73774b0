// TensorFlow.js (pure JavaScript, CPU backend) as the reference runtime for keel's
// TensorFlow.js Layers reader and writer.
//
//   node tfjs_layers_oracle.js make  DIR   writes DIR/from_tfjs/<model>/ with model.json and shards
//                                          (tf.LayersModel.save) and io.json: a fixed input and
//                                          tfjs's prediction for it
//   node tfjs_layers_oracle.js check DIR   loads every DIR/from_keel/<model>/model.json (written by
//                                          keel) with tf.loadLayersModel and compares its prediction
//                                          on io.json's input with keel's, within io.json's tolerance
//
// Without tfjs-node there is no file:// handler, so both directions use small fs-based handlers.
'use strict';
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

function saveHandler(dir) {
  return {
    save: async (artifacts) => {
      fs.mkdirSync(dir, {recursive: true});
      const bin = 'group1-shard1of1.bin';
      fs.writeFileSync(path.join(dir, bin), Buffer.from(artifacts.weightData));
      const modelJson = {
        format: artifacts.format, generatedBy: artifacts.generatedBy, convertedBy: artifacts.convertedBy,
        modelTopology: artifacts.modelTopology,
        weightsManifest: [{paths: [bin], weights: artifacts.weightSpecs}],
      };
      fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(modelJson));
      return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
    },
  };
}

// model.json plus its shards, concatenated group by group in manifest order (as tfjs's
// http/file handlers do before decodeWeights).
function loadHandler(modelJsonPath) {
  return {
    load: async () => {
      const dir = path.dirname(modelJsonPath);
      const mj = JSON.parse(fs.readFileSync(modelJsonPath, 'utf8'));
      const specs = [];
      const buffers = [];
      for (const group of mj.weightsManifest) {
        specs.push(...group.weights);
        for (const p of group.paths) buffers.push(fs.readFileSync(path.join(dir, p)));
      }
      const all = Buffer.concat(buffers);
      const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
      return {modelTopology: mj.modelTopology, weightSpecs: specs, weightData, format: mj.format};
    },
  };
}

// Fixed weights: w[i] = 0.5 sin(0.37 (i + 1) + k) for the k-th weight; variances positive.
function setFixedWeights(model) {
  model.weights.forEach((w, k) => {
    const n = w.shape.reduce((a, b) => a * b, 1);
    const v = new Float32Array(n);
    for (let i = 0; i < n; ++i) {
      const s = 0.5 * Math.sin(0.37 * (i + 1) + k);
      v[i] = w.name.endsWith('moving_variance') ? 1 + Math.abs(s) : s;
    }
    w.write(tf.tensor(v, w.shape));
  });
}

// Inputs: x[i] = sin(0.11 i) + 0.2 cos(0.7 i) (or small integers for embeddings).
function fixedInput(shape, ints) {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  for (let i = 0; i < n; ++i) v[i] = ints ? (i * 7) % ints : Math.sin(0.11 * i) + 0.2 * Math.cos(0.7 * i);
  return {shape, data: Array.from(v), dtype: ints ? 'int32' : 'float32'};
}

function models() {
  const L = tf.layers;
  const out = {};
  {
    const m = tf.sequential({name: 'seq_conv'});
    m.add(L.conv2d({inputShape: [6, 6, 2], filters: 3, kernelSize: 3, padding: 'same', activation: 'relu'}));
    m.add(L.batchNormalization());
    m.add(L.maxPooling2d({poolSize: 2}));
    m.add(L.conv2d({filters: 4, kernelSize: 2, activation: 'tanh'}));
    m.add(L.flatten());
    m.add(L.dense({units: 5, activation: 'relu'}));
    m.add(L.dropout({rate: 0.25}));
    m.add(L.dense({units: 3, activation: 'softmax'}));
    out.seq_conv = {model: m, input: fixedInput([2, 6, 6, 2])};
  }
  {
    const m = tf.sequential({name: 'seq_rnn'});
    m.add(L.lstm({inputShape: [5, 3], units: 4, recurrentActivation: 'sigmoid', returnSequences: true}));
    m.add(L.simpleRNN({units: 4, returnSequences: true}));
    m.add(L.gru({units: 3, recurrentActivation: 'sigmoid'}));
    m.add(L.dense({units: 2}));
    out.seq_rnn = {model: m, input: fixedInput([2, 5, 3])};
  }
  {
    // tfjs's defaults: recurrentActivation 'hardSigmoid' (Keras 2's clip(0.2 x + 0.5, 0, 1)).
    const m = tf.sequential({name: 'seq_rnn_defaults'});
    m.add(L.lstm({inputShape: [5, 3], units: 4, returnSequences: true}));
    m.add(L.gru({units: 3}));
    out.seq_rnn_defaults = {model: m, input: fixedInput([2, 5, 3])};
  }
  {
    const m = tf.sequential({name: 'seq_misc'});
    m.add(L.depthwiseConv2d({inputShape: [8, 8, 3], kernelSize: 3, depthMultiplier: 2}));
    m.add(L.separableConv2d({filters: 4, kernelSize: 3, padding: 'same', activation: 'elu'}));
    m.add(L.averagePooling2d({poolSize: 2}));
    m.add(L.zeroPadding2d({padding: 1}));
    m.add(L.upSampling2d({size: [2, 2]}));
    m.add(L.conv2dTranspose({filters: 2, kernelSize: 3, strides: 2, padding: 'same'}));
    m.add(L.globalMaxPooling2d({}));
    m.add(L.dense({units: 2, activation: 'sigmoid'}));
    out.seq_misc = {model: m, input: fixedInput([2, 8, 8, 3])};
  }
  {
    const m = tf.sequential({name: 'seq_1d'});
    m.add(L.conv1d({inputShape: [10, 3], filters: 4, kernelSize: 3, activation: 'relu'}));
    m.add(L.maxPooling1d({poolSize: 2}));
    m.add(L.permute({dims: [2, 1]}));
    m.add(L.reshape({targetShape: [8, 2]}));
    m.add(L.globalAveragePooling1d({}));
    m.add(L.leakyReLU({alpha: 0.2}));
    m.add(L.dense({units: 3, activation: 'softplus'}));
    out.seq_1d = {model: m, input: fixedInput([2, 10, 3])};
  }
  {
    const m = tf.sequential({name: 'seq_embed'});
    m.add(L.embedding({inputDim: 10, outputDim: 3, inputLength: 5, inputShape: [5]}));
    m.add(L.globalAveragePooling1d({}));
    m.add(L.dense({units: 2}));
    out.seq_embed = {model: m, input: fixedInput([2, 5], 10)};
  }
  {
    const a = tf.input({shape: [4], name: 'a'});
    const b = tf.input({shape: [4], name: 'b'});
    const da = L.dense({units: 4, activation: 'elu', name: 'da'}).apply(a);
    const db = L.dense({units: 4, activation: 'sigmoid', name: 'db'}).apply(b);
    const s = L.add({name: 'sum'}).apply([da, db]);
    const p = L.multiply({name: 'prod'}).apply([da, db]);
    const c = L.concatenate({name: 'cat'}).apply([s, p, a]);
    const n = L.layerNormalization({name: 'ln'}).apply(c);
    const y = L.dense({units: 2, name: 'out'}).apply(n);
    const m = tf.model({inputs: [a, b], outputs: y, name: 'functional'});
    out.functional = {model: m, inputs: [fixedInput([2, 4]), fixedInput([2, 4])]};
  }
  return out;
}

function toTensor(x) { return tf.tensor(x.data, x.shape, x.dtype || 'float32'); }

async function make(dir) {
  for (const [name, spec] of Object.entries(models())) {
    setFixedWeights(spec.model);
    const sub = path.join(dir, 'from_tfjs', name);
    await spec.model.save(saveHandler(sub));
    const inputs = spec.inputs || [spec.input];
    const y = spec.model.predict(inputs.length === 1 ? toTensor(inputs[0]) : inputs.map(toTensor));
    fs.writeFileSync(path.join(sub, 'io.json'), JSON.stringify({
      inputs, output: {shape: y.shape, data: Array.from(y.dataSync())}, tolerance: 1e-5,
    }));
  }
}

async function check(dir) {
  const base = path.join(dir, 'from_keel');
  const names = fs.readdirSync(base).sort();
  if (names.length === 0) throw new Error(`no models in ${base}`);
  let failures = 0;
  for (const name of names) {
    const sub = path.join(base, name);
    const io = JSON.parse(fs.readFileSync(path.join(sub, 'io.json'), 'utf8'));
    const model = await tf.loadLayersModel(loadHandler(path.join(sub, 'model.json')));
    const xs = io.inputs.map(toTensor);
    const y = model.predict(xs.length === 1 ? xs[0] : xs);
    const got = y.dataSync();
    let worst = 0;
    if (JSON.stringify(y.shape) !== JSON.stringify(io.output.shape)) {
      console.log(`${name}: shape ${JSON.stringify(y.shape)} != keel's ${JSON.stringify(io.output.shape)}`);
      ++failures;
      continue;
    }
    for (let i = 0; i < got.length; ++i) worst = Math.max(worst, Math.abs(got[i] - io.output.data[i]));
    const ok = worst <= io.tolerance;
    console.log(`${name}: max |tfjs - keel| = ${worst.toExponential(3)} (tolerance ${io.tolerance}) ${ok ? 'ok' : 'FAIL'}`);
    if (!ok) ++failures;
  }
  if (failures) throw new Error(`${failures} model(s) differ`);
}

const [mode, dir] = process.argv.slice(2);
const run = mode === 'make' ? make : mode === 'check' ? check : null;
if (!run || !dir) {
  console.error('usage: node tfjs_layers_oracle.js make|check DIR');
  process.exit(2);
}
run(dir).catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
