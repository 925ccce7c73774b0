// TensorFlow.js weight manifests and shards (see tfjs_weights.hpp for the layout).
#include "io/tfjs_weights.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/ops/creation.hpp"

namespace keel::io::detail {

namespace {

using nlohmann::json;

// No weight of a real model comes near this; it keeps every byte count below in range.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 36;

void put_le32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint32_t get_le32(const unsigned char* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}

// IEEE half -> float (tfjs-core's float16 dequantization table computes the same values).
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

std::string json_excerpt(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace

AffineQuantization quantize_affine(const std::vector<float>& w, int bits) {
  AffineQuantization out;
  out.q.assign(w.size(), 0);
  if (w.empty()) return out;
  const double qmax = bits == 8 ? 255.0 : 65535.0;
  double lo = *std::min_element(w.begin(), w.end()), hi = *std::max_element(w.begin(), w.end());
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError(fmt::format("save_tfjs: uint{} quantization of a weight holding inf or NaN", bits));
  if (lo == hi) {  // "If there is only a single value, we can represent everything as zeros."
    out.min = lo;
    out.scale = 1.0;
    return out;
  }
  const double scale = (hi - lo) / qmax;
  double nmin = lo, nmax = hi;
  if (lo <= 0 && 0 <= hi) {
    const double zero_point = std::nearbyint((0 - lo) / scale);  // np.round: half to even
    nmin = -zero_point * scale;
    nmax = qmax * scale + nmin;
  }
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double c = std::clamp(static_cast<double>(w[i]), nmin, nmax);
    out.q[i] = static_cast<std::uint16_t>(std::clamp(std::nearbyint((c - nmin) / scale), 0.0, qmax));
  }
  out.min = nmin;
  out.scale = scale;
  return out;
}

EncodedWeights encode_tfjs_weights(const std::vector<TfjsWeight>& weights, const std::string& quantization,
                                   std::int64_t shard_size_bytes) {
  if (quantization != "" && quantization != "uint8" && quantization != "uint16")
    throw ValueError(fmt::format("save_tfjs: quantization '{}' (expected \"\", \"uint8\" or \"uint16\")", quantization));
  if (shard_size_bytes <= 0)
    throw ValueError(fmt::format("save_tfjs: shard_size_bytes must be positive, got {}", shard_size_bytes));
  std::string data;
  json specs = json::array();
  for (const auto& w : weights) {
    json spec = {{"name", w.name}, {"shape", json::array()}};
    for (std::int64_t d : w.value.shape().dims()) spec["shape"].push_back(d);
    const DType dt = w.value.dtype();
    if (dt == DType::int32 || dt == DType::int64 || dt == DType::uint8 || dt == DType::bool_) {
      // tfjs has int32 (and bool) weights; keel's integer weights are written as int32.
      std::vector<std::int64_t> v = w.value.to_vector<std::int64_t>();
      for (auto x : v) {
        if (x < std::numeric_limits<std::int32_t>::min() || x > std::numeric_limits<std::int32_t>::max())
          throw ValueError(fmt::format("save_tfjs: weight '{}': value {} does not fit int32", w.name, x));
        put_le32(data, static_cast<std::uint32_t>(static_cast<std::int32_t>(x)));
      }
      spec["dtype"] = "int32";
    } else {
      const std::vector<float> v = w.value.to_vector<float>();
      spec["dtype"] = "float32";
      if (quantization.empty()) {
        for (float x : v) {
          std::uint32_t bitsv;
          std::memcpy(&bitsv, &x, 4);
          put_le32(data, bitsv);
        }
      } else {
        const int bits = quantization == "uint8" ? 8 : 16;
        const AffineQuantization q = quantize_affine(v, bits);
        for (std::uint16_t x : q.q) {
          data.push_back(static_cast<char>(x & 0xFF));
          if (bits == 16) data.push_back(static_cast<char>(x >> 8));
        }
        spec["quantization"] = {{"dtype", quantization}, {"min", q.min}, {"scale", q.scale}};
      }
    }
    specs.push_back(std::move(spec));
  }
  // write_weights.py: the group's bytes cut into shard_size pieces, the last one shorter.
  EncodedWeights out;
  const std::size_t size = static_cast<std::size_t>(shard_size_bytes);
  const std::size_t n = (data.size() + size - 1) / size;
  json paths = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    std::string name = fmt::format("group1-shard{}of{}.bin", i + 1, n);
    paths.push_back(name);
    out.shards.emplace_back(std::move(name), data.substr(i * size, size));
  }
  out.manifest_json = json::array({{{"paths", paths}, {"weights", specs}}}).dump();
  return out;
}

std::vector<TfjsWeight> decode_tfjs_weights(const json& manifest, const std::string& file,
                                            const std::function<std::string(const std::string&)>& read_shard) {
  const auto fail = [&](const std::string& field, const std::string& what) -> void {
    throw IOError(fmt::format("load_tfjs: {}: {}: {}", file, field, what));
  };
  if (!manifest.is_array()) fail("weightsManifest", "must be a list of groups, got " + json_excerpt(manifest));
  std::vector<TfjsWeight> out;
  std::set<std::string> names;
  for (std::size_t g = 0; g < manifest.size(); ++g) {
    const std::string gw = fmt::format("weightsManifest[{}]", g);
    const json& group = manifest[g];
    if (!group.is_object()) fail(gw, "must be an object {\"paths\", \"weights\"}");
    auto paths = group.find("paths");
    auto weights = group.find("weights");
    if (paths == group.end() || !paths->is_array()) fail(gw + ".paths", "missing or not a list");
    if (weights == group.end() || !weights->is_array()) fail(gw + ".weights", "missing or not a list");
    std::string data;
    for (std::size_t p = 0; p < paths->size(); ++p) {
      const json& path = (*paths)[p];
      if (!path.is_string()) fail(fmt::format("{}.paths[{}]", gw, p), "must be a string, got " + json_excerpt(path));
      data += read_shard(path.get<std::string>());
    }
    std::uint64_t offset = 0;
    for (std::size_t k = 0; k < weights->size(); ++k) {
      const json& spec = (*weights)[k];
      const std::string ww = fmt::format("{}.weights[{}]", gw, k);
      if (!spec.is_object()) fail(ww, "must be an object {\"name\", \"shape\", \"dtype\"}");
      auto name = spec.find("name");
      auto shape = spec.find("shape");
      auto dtype = spec.find("dtype");
      if (name == spec.end() || !name->is_string() || name->get<std::string>().empty())
        fail(ww + ".name", "missing or not a non-empty string");
      const std::string wname = name->get<std::string>();
      const std::string wl = fmt::format("{} ('{}')", ww, wname);
      if (!names.insert(wname).second) fail(wl, "a second weight of this name");
      if (shape == spec.end() || !shape->is_array()) fail(wl + ".shape", "missing or not a list");
      std::vector<std::int64_t> dims;
      std::uint64_t numel = 1;
      for (const json& d : *shape) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
          fail(wl + ".shape", "dimensions must be non-negative integers, got " + json_excerpt(*shape));
        const auto u = static_cast<std::uint64_t>(d.get<std::int64_t>());
        if (u != 0 && numel > kMaxElements / u) fail(wl + ".shape", json_excerpt(*shape) + " is implausibly large");
        numel *= u;
        dims.push_back(d.get<std::int64_t>());
      }
      if (numel > kMaxElements) fail(wl + ".shape", json_excerpt(*shape) + " is implausibly large");
      if (dtype == spec.end() || !dtype->is_string()) fail(wl + ".dtype", "missing or not a string");
      const std::string dt = dtype->get<std::string>();
      if (dt != "float32" && dt != "int32") fail(wl + ".dtype", fmt::format("'{}' (keel reads float32 and int32)", dt));
      // The stored form: the dtype itself, or a quantization of it.
      std::string stored = dt;
      double qmin = 0, qscale = 1;
      if (auto q = spec.find("quantization"); q != spec.end() && !q->is_null()) {
        if (!q->is_object() || !q->contains("dtype") || !(*q)["dtype"].is_string())
          fail(wl + ".quantization", "must be an object with a \"dtype\" string, got " + json_excerpt(*q));
        stored = (*q)["dtype"].get<std::string>();
        if (stored == "uint8" || stored == "uint16") {
          auto mn = q->find("min");
          auto sc = q->find("scale");
          if (mn == q->end() || !mn->is_number() || sc == q->end() || !sc->is_number())
            fail(wl + ".quantization", stored + " needs numbers \"min\" and \"scale\"");
          qmin = mn->get<double>();
          qscale = sc->get<double>();
          if (!std::isfinite(qmin) || !std::isfinite(qscale))
            fail(wl + ".quantization", "min and scale must be finite");
        } else if (stored == "float16") {
          if (dt != "float32") fail(wl + ".quantization", "float16 quantization of a non-float32 weight");
        } else {
          fail(wl + ".quantization.dtype", fmt::format("'{}' (expected uint8, uint16 or float16)", stored));
        }
      }
      const std::uint64_t width = stored == "uint8" ? 1 : (stored == "uint16" || stored == "float16") ? 2 : 4;
      const std::uint64_t bytes = numel * width;
      if (offset > data.size() || data.size() - offset < bytes)
        fail(wl, fmt::format("needs bytes [{}, {}) of the group's shards, which hold {} bytes (a shard is too short "
                             "or missing)", offset, offset + bytes, data.size()));
      const auto* p = reinterpret_cast<const unsigned char*>(data.data()) + offset;
      offset += bytes;
      const std::size_t n = static_cast<std::size_t>(numel);
      Tensor value;
      if (dt == "int32") {
        std::vector<std::int32_t> v(n);
        for (std::size_t i = 0; i < n; ++i) {
          if (stored == "int32") v[i] = static_cast<std::int32_t>(get_le32(p + 4 * i));
          else {
            // tfjs-core: Math.round(q * scale + min) for integer weights.
            const double q = stored == "uint8" ? p[i] : (p[2 * i] | (p[2 * i + 1] << 8));
            const double r = std::round(q * qscale + qmin);
            if (!(r >= std::numeric_limits<std::int32_t>::min() && r <= std::numeric_limits<std::int32_t>::max()))
              fail(wl, "a dequantized value does not fit int32");
            v[i] = static_cast<std::int32_t>(r);
          }
        }
        value = constant(v, Shape(dims), DType::int32);
      } else {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) {
          if (stored == "float32") {
            const std::uint32_t b = get_le32(p + 4 * i);
            std::memcpy(&v[i], &b, 4);
          } else if (stored == "float16") {
            v[i] = half_to_float(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
          } else {
            const double q = stored == "uint8" ? p[i] : (p[2 * i] | (p[2 * i + 1] << 8));
            v[i] = static_cast<float>(q * qscale + qmin);  // tfjs-core: v * scale + min
          }
        }
        value = constant(v, Shape(dims), DType::float32);
      }
      out.push_back({wname, value});
    }
    if (offset != data.size())
      fail(gw, fmt::format("its shards hold {} bytes, but its weights use {}", data.size(), offset));
  }
  return out;
}

}  // namespace keel::io::detail
