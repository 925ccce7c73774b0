// Text and category preprocessing layers: TextVectorization, StringLookup, IntegerLookup,
// CategoryEncoding, Hashing, and the hashes behind them (FarmHash Fingerprint64, SipHash-2-4).
// Expected values come from the Keras / TensorFlow documentation examples or are derived by hand
// from Keras' definitions (written beside them). These layers have no weights and their outputs
// are ids and counts, so there are no gradients to check.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include <keel/keel.hpp>

using namespace keel;
using namespace keel::layers;
using Strings = std::vector<std::string>;

namespace {

std::vector<std::int64_t> ids(const Tensor& t) { return t.to_vector<std::int64_t>(); }
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("farmhash_fingerprint64 matches published Fingerprint64 values", "[text][hash]") {
  // Length 0 is FarmHash's constant k2.
  CHECK(farmhash_fingerprint64("") == 0x9ae16a3b2f90404fULL);
  // BigQuery's FARM_FINGERPRINT documentation (signed INT64 of Fingerprint64):
  // CONCAT(x, y, z) for (1, "foo", true), (2, "apple", false), (3, "", true).
  CHECK(static_cast<std::int64_t>(farmhash_fingerprint64("1footrue")) == -1541654101129638711LL);      // 8 bytes
  CHECK(static_cast<std::int64_t>(farmhash_fingerprint64("2applefalse")) == 2794438866806483259LL);    // 11 bytes
  CHECK(static_cast<std::int64_t>(farmhash_fingerprint64("3true")) == -4880158226897771312LL);         // 5 bytes
  // Guava's farmHashFingerprint64 / pyfarmhash: "alphabet"; Redshift's farmFingerprint64.
  CHECK(static_cast<std::int64_t>(farmhash_fingerprint64("alphabet")) == -2427165924636348523LL);
  CHECK(static_cast<std::int64_t>(farmhash_fingerprint64("Amazon Redshift")) == 8085098817162212970LL);  // 15 bytes
  // tf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3) == [0, 2, 2] (TF docs).
  CHECK(farmhash_fingerprint64("Hello") % 3 == 0);
  CHECK(farmhash_fingerprint64("TensorFlow") % 3 == 2);
  CHECK(farmhash_fingerprint64("2.x") % 3 == 2);
  // The longer paths (17-32, 33-64, > 64 bytes, several 64-byte blocks) run, depend on every
  // byte and on the length.
  for (std::size_t len : {17u, 31u, 33u, 64u, 65u, 130u, 1000u}) {
    std::string s(len, 'x');
    const auto h = farmhash_fingerprint64(s);
    s[len / 2] = 'y';
    CHECK(farmhash_fingerprint64(s) != h);
    CHECK(farmhash_fingerprint64(s + "x") != farmhash_fingerprint64(s));
  }
}

TEST_CASE("siphash64 matches the SipHash-2-4 paper's vectors", "[text][hash]") {
  // Key 00 01 .. 0f (little-endian words), messages 00 01 .. (n-1): Appendix A of the paper and
  // the reference implementation's vectors.
  const std::uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
  CHECK(siphash64("", k0, k1) == 0x726fdb47dd0e0e31ULL);
  std::string m;
  for (int i = 0; i < 15; ++i) m.push_back(static_cast<char>(i));
  CHECK(siphash64(m, k0, k1) == 0xa129ca6149be45e5ULL);
}

TEST_CASE("Hashing bins strings as the Keras documentation shows", "[text][hashing]") {
  // keras.layers.Hashing examples: num_bins = 3 on A..E -> 1 0 1 1 2.
  CHECK(ids(Hashing(3)(Strings{"A", "B", "C", "D", "E"})) == std::vector<std::int64_t>{1, 0, 1, 1, 2});
  // mask_value '': the mask goes to 0, the rest to 1 + hash % 2.
  CHECK(ids(Hashing(3, {.mask_value = ""})(Strings{"A", "B", "", "C", "D"})) == std::vector<std::int64_t>{1, 1, 0, 2, 2});
  // salt = [133, 137]: SipHash keyed with the pair.
  CHECK(ids(Hashing(3, {.salt = {133, 137}})(Strings{"A", "B", "C", "D", "E"})) == std::vector<std::int64_t>{1, 2, 1, 0, 2});
  // Integers hash as their decimal strings (tf.strings.as_string), any shape, non-contiguous too.
  Hashing h(7);
  const Tensor x = transpose(constant<std::int64_t>({1, 22, 333, -4, 5, 60}, Shape{2, 3}));
  const Tensor got = h(x);
  REQUIRE(got.shape() == Shape{3, 2});
  const std::vector<std::string> text = {"1", "-4", "22", "5", "333", "60"};  // x^T row-major
  for (std::size_t i = 0; i < text.size(); ++i) CHECK(ids(got)[i] == static_cast<std::int64_t>(farmhash_fingerprint64(text[i]) % 7));
  // multi_hot over the bins.
  const Tensor mh = Hashing(3, {.output_mode = "multi_hot"})(Strings{"A", "B"});  // bins 1, 0
  CHECK(floats(mh) == std::vector<float>{1, 1, 0});
  CHECK(Hashing(3)(Strings{}).shape() == Shape{0});
  CHECK_THROWS_AS(Hashing(0), ValueError);
  CHECK_THROWS_AS(Hashing(3, {.salt = {1, 2, 3}}), ValueError);
  CHECK_THROWS_AS(Hashing(3, {.output_mode = "tf_idf"}), ValueError);
  CHECK_THROWS_AS(h(constant<float>({1.5f}, Shape{1})), DTypeError);
}

TEST_CASE("StringLookup maps tokens to indices as Keras", "[text][lookup]") {
  const Strings vocab = {"a", "b", "c", "d"};
  StringLookup lookup({.vocabulary = vocab});
  // Keras docs: [["a","c","d"],["d","z","b"]] -> [[1,3,4],[4,0,2]] (index 0 is the OOV slot).
  CHECK(ids(lookup.call_rows({{"a", "c", "d"}, {"d", "z", "b"}})) == std::vector<std::int64_t>{1, 3, 4, 4, 0, 2});
  CHECK(lookup.call_rows({{"a", "c", "d"}, {"d", "z", "b"}}).shape() == Shape{2, 3});
  CHECK(lookup.get_vocabulary() == Strings{"[UNK]", "a", "b", "c", "d"});
  CHECK(lookup.vocabulary_size() == 5);
  CHECK(ids(lookup(Strings{"d"})) == std::vector<std::int64_t>{4});
  // Two OOV slots (docs: [[2,4,5],[5,1,3]]): "z" goes to slot Fingerprint64("z") % 2 = 1
  // (Fingerprint64("z") = 0xd8933e94895bdf99 is odd), the tokens move up by one.
  StringLookup two({.num_oov_indices = 2, .vocabulary = vocab});
  CHECK(farmhash_fingerprint64("z") % 2 == 1);
  CHECK(ids(two.call_rows({{"a", "c", "d"}, {"d", "z", "b"}})) == std::vector<std::int64_t>{2, 4, 5, 5, 1, 3});
  // A mask token takes index 0 and moves everything up by one.
  StringLookup masked({.mask_token = "", .vocabulary = vocab});
  CHECK(masked.get_vocabulary() == Strings{"", "[UNK]", "a", "b", "c", "d"});
  CHECK(ids(masked(Strings{"", "a", "q"})) == std::vector<std::int64_t>{0, 2, 1});
  // num_oov_indices = 0: an unknown token is an error.
  StringLookup strict({.num_oov_indices = 0, .vocabulary = vocab});
  CHECK(ids(strict(Strings{"a", "d"})) == std::vector<std::int64_t>{0, 3});
  CHECK_THROWS_AS(strict(Strings{"z"}), ValueError);
  // Special tokens given at the front of the vocabulary are recognised.
  StringLookup with_specials({.vocabulary = {"[UNK]", "a", "b"}});
  CHECK(with_specials.get_vocabulary() == Strings{"[UNK]", "a", "b"});
  CHECK_THROWS_AS(StringLookup({.vocabulary = {"a", "b", "a"}}), ValueError);      // repeated
  CHECK_THROWS_AS(StringLookup({.vocabulary = {"a", "[UNK]"}}), ValueError);       // OOV token inside
  CHECK_THROWS_AS(StringLookup({.max_tokens = 3, .vocabulary = vocab}), ValueError);  // 5 > 3
  CHECK_THROWS_AS(StringLookup({.output_mode = "bogus"}), ValueError);
  CHECK_THROWS_AS(lookup(constant<float>({1.0f}, Shape{1})), ValueError);  // tensors hold no strings
  CHECK_THROWS_AS(lookup.call_rows({{"a"}, {"a", "b"}}), ShapeError);     // ragged in int mode
}

TEST_CASE("StringLookup encodings: one_hot, multi_hot, count, tf_idf", "[text][lookup]") {
  const Strings vocab = {"a", "b", "c", "d"};
  // one_hot (docs): one row per token, [UNK] first.
  const Tensor oh = StringLookup({.vocabulary = vocab, .output_mode = "one_hot"})(Strings{"a", "b", "c", "d", "z"});
  REQUIRE(oh.shape() == Shape{5, 5});
  CHECK(floats(oh) == std::vector<float>{0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  const std::vector<std::vector<std::string>> data = {{"a", "c", "d", "d"}, {"d", "z", "b", "z"}};
  // multi_hot (docs): [[0,1,0,1,1],[1,0,1,0,1]].
  CHECK(floats(StringLookup({.vocabulary = vocab, .output_mode = "multi_hot"}).call_rows(data)) ==
        std::vector<float>{0, 1, 0, 1, 1, 1, 0, 1, 0, 1});
  // count (docs): [[0,1,0,1,2],[2,0,1,0,1]].
  CHECK(floats(StringLookup({.vocabulary = vocab, .output_mode = "count"}).call_rows(data)) ==
        std::vector<float>{0, 1, 0, 1, 2, 2, 0, 1, 0, 1});
  // A rank-1 input is one sample.
  CHECK(StringLookup({.vocabulary = vocab, .output_mode = "count"})(Strings{"a", "a"}).shape() == Shape{5});
  // tf_idf (docs): idf [0.25, 0.75, 0.6, 0.4]; the OOV slot gets their mean 0.5, so
  // [[0, 0.25, 0, 0.6, 0.8], [1.0, 0, 0.75, 0, 0.4]] (count * idf).
  StringLookup tfidf({.vocabulary = vocab, .idf_weights = {0.25, 0.75, 0.6, 0.4}, .output_mode = "tf_idf"});
  const std::vector<float> got = floats(tfidf.call_rows(data));
  const std::vector<float> want = {0, 0.25f, 0, 0.6f, 0.8f, 1.0f, 0, 0.75f, 0, 0.4f};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]));
  // pad_to_max_tokens widens the encoding with zeros.
  CHECK(StringLookup({.max_tokens = 7, .vocabulary = vocab, .output_mode = "multi_hot", .pad_to_max_tokens = true})(Strings{"b"})
            .shape() == Shape{7});
  CHECK_THROWS_AS(StringLookup({.vocabulary = vocab, .output_mode = "tf_idf"}), ValueError);  // no idf
  CHECK_THROWS_AS(StringLookup({.output_mode = "multi_hot", .pad_to_max_tokens = true}), ValueError);  // no max_tokens
  CHECK_THROWS_AS(StringLookup({.vocabulary = vocab, .output_mode = "one_hot"}).call_rows({{"a", "b"}}), ValueError);
}

TEST_CASE("StringLookup adapt and invert", "[text][lookup]") {
  // Keras docs: adapt on [["a","c","d"],["d","z","b"]] -> ['[UNK]', 'd', 'z', 'c', 'b', 'a']: d
  // occurs twice; the ties are broken by the token, descending (np.lexsort(...)[::-1]).
  StringLookup lookup;
  lookup.adapt_rows({{"a", "c", "d"}, {"d", "z", "b"}});
  CHECK(lookup.get_vocabulary() == Strings{"[UNK]", "d", "z", "c", "b", "a"});
  // max_tokens keeps the most frequent (5 = [UNK] + 4 tokens).
  StringLookup small({.max_tokens = 3});
  small.adapt(Strings{"x", "y", "y", "z", "z", "z"});
  CHECK(small.get_vocabulary() == Strings{"[UNK]", "z", "y"});
  // adapt again replaces the vocabulary.
  small.adapt(Strings{"q"});
  CHECK(small.get_vocabulary() == Strings{"[UNK]", "q"});
  // invert (docs): [[1,3,4],[4,0,2]] -> [["a","c","d"],["d","[UNK]","b"]]; out of range -> [UNK].
  StringLookup inv({.vocabulary = {"a", "b", "c", "d"}, .invert = true});
  CHECK(inv.inverse(constant<std::int64_t>({1, 3, 4, 4, 0, 2, 9, -1}, Shape{8})) ==
        Strings{"a", "c", "d", "d", "[UNK]", "b", "[UNK]", "[UNK]"});
  CHECK_THROWS_AS(inv(Strings{"a"}), ValueError);
  CHECK_THROWS_AS(lookup.inverse(constant<std::int64_t>({1}, Shape{1})), ValueError);
  CHECK_THROWS_AS(StringLookup({.invert = true, .output_mode = "multi_hot"}), ValueError);
}

TEST_CASE("IntegerLookup as Keras' examples", "[text][lookup]") {
  const Tensor data = constant<std::int64_t>({12, 1138, 42, 42, 1000, 36}, Shape{2, 3});
  IntegerLookup lookup({.vocabulary = {12, 36, 1138, 42}});
  // Docs: [[1,3,4],[4,0,2]].
  CHECK(ids(lookup(data)) == std::vector<std::int64_t>{1, 3, 4, 4, 0, 2});
  CHECK(lookup(data).shape() == Shape{2, 3});
  // int32 input and a transposed (non-contiguous) view.
  CHECK(ids(lookup(transpose(data.astype(DType::int32)))) == std::vector<std::int64_t>{1, 4, 3, 0, 4, 2});
  // Docs: adapt -> [-1, 42, 1138, 1000, 36, 12] (42 twice; ties by value, descending).
  IntegerLookup adapted;
  adapted.adapt(data);
  CHECK(adapted.get_vocabulary() == std::vector<std::int64_t>{-1, 42, 1138, 1000, 36, 12});
  // Two OOV slots: 1000 floormod 2 = 0 (docs: [[2,4,5],[5,0,3]]); -3 floormod 2 = 1.
  IntegerLookup two({.num_oov_indices = 2, .vocabulary = {12, 36, 1138, 42}});
  CHECK(ids(two(data)) == std::vector<std::int64_t>{2, 4, 5, 5, 0, 3});
  CHECK(ids(two(constant<std::int64_t>({-3}, Shape{1}))) == std::vector<std::int64_t>{1});
  // mask_token 0 -> index 0, the OOV slot moves to 1.
  IntegerLookup masked({.mask_token = 0, .vocabulary = {12, 36, 1138, 42}});
  CHECK(ids(masked(constant<std::int64_t>({0, 12, 7}, Shape{3}))) == std::vector<std::int64_t>{0, 2, 1});
  // invert (docs): [[1,3,4],[4,0,2]] -> [[12,1138,42],[42,-1,36]].
  IntegerLookup inv({.vocabulary = {12, 36, 1138, 42}, .invert = true});
  CHECK(ids(inv(constant<std::int64_t>({1, 3, 4, 4, 0, 2}, Shape{2, 3}))) == std::vector<std::int64_t>{12, 1138, 42, 42, -1, 36});
  // multi_hot of a rank-2 batch: [batch, 5].
  IntegerLookup mh({.vocabulary = {12, 36, 1138, 42}, .output_mode = "multi_hot"});
  CHECK(floats(mh(data)) == std::vector<float>{0, 1, 0, 1, 1, 1, 0, 1, 0, 1});
  // Empty input.
  CHECK(lookup(zeros(Shape{0}, DType::int64)).shape() == Shape{0});
  CHECK_THROWS_AS(lookup(constant<float>({1.0f}, Shape{1})), DTypeError);
  CHECK_THROWS_AS(mh(zeros(Shape{1, 2, 2}, DType::int64)), ValueError);  // rank 3
}

TEST_CASE("CategoryEncoding one_hot, multi_hot and count", "[text][category]") {
  // Keras docs, num_tokens = 4: one_hot [3, 2, 0, 1] -> rows of the identity in that order.
  const Tensor oh = CategoryEncoding(4, {.output_mode = "one_hot"})(constant<std::int64_t>({3, 2, 0, 1}, Shape{4}));
  REQUIRE(oh.shape() == Shape{4, 4});
  CHECK(floats(oh) == std::vector<float>{0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0});
  const Tensor batch = constant<std::int64_t>({0, 1, 0, 0, 1, 2, 3, 1}, Shape{4, 2});
  // multi_hot (docs): [[1,1,0,0],[1,0,0,0],[0,1,1,0],[0,1,0,1]].
  CHECK(floats(CategoryEncoding(4)(batch)) == std::vector<float>{1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1});
  // count (docs): [[1,1,0,0],[2,0,0,0],[0,1,1,0],[0,1,0,1]].
  CHECK(floats(CategoryEncoding(4, {.output_mode = "count"})(batch)) ==
        std::vector<float>{1, 1, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1});
  // A rank-1 input is one sample; one_hot of [n, 1] is [n, depth]; a transposed input.
  CHECK(floats(CategoryEncoding(4)(constant<std::int32_t>({0, 1, 1, 3}, Shape{4}))) == std::vector<float>{1, 1, 0, 1});
  CHECK(CategoryEncoding(4, {.output_mode = "one_hot"})(constant<std::int64_t>({1, 2}, Shape{2, 1})).shape() == Shape{2, 4});
  // transpose([[0,1],[2,3]]) = [[0,2],[1,3]].
  CHECK(floats(CategoryEncoding(4)(transpose(constant<std::int64_t>({0, 1, 2, 3}, Shape{2, 2})))) ==
        std::vector<float>{1, 0, 1, 0, 0, 1, 0, 1});
  CHECK(CategoryEncoding(4)(zeros(Shape{0, 2}, DType::int64)).shape() == Shape{0, 4});
  CHECK_THROWS_AS(CategoryEncoding(4)(constant<std::int64_t>({4}, Shape{1})), ValueError);   // id 4 >= 4
  CHECK_THROWS_AS(CategoryEncoding(4)(constant<std::int64_t>({-1}, Shape{1})), ValueError);
  CHECK_THROWS_AS(CategoryEncoding(4)(zeros(Shape{1, 1, 1}, DType::int64)), ValueError);
  CHECK_THROWS_AS(CategoryEncoding(4, {.output_mode = "one_hot"})(zeros(Shape{2, 2}, DType::int64)), ValueError);
  CHECK_THROWS_AS(CategoryEncoding(4)(constant<float>({1.0f}, Shape{1})), DTypeError);
  CHECK_THROWS_AS(CategoryEncoding(0), ValueError);
  CHECK_THROWS_AS(CategoryEncoding(4, {.output_mode = "tf_idf"}), ValueError);
}

TEST_CASE("TextVectorization standardizes, splits and makes n-grams", "[text][vectorization]") {
  CHECK(TextVectorization().tokenize("The Earth, wind & FIRE!") == Strings{"the", "earth", "wind", "fire"});
  CHECK(TextVectorization({.standardize = "lower"}).tokenize("Hi, There") == Strings{"hi,", "there"});
  CHECK(TextVectorization({.standardize = "strip_punctuation"}).tokenize("Hi, There!") == Strings{"Hi", "There"});
  CHECK(TextVectorization({.standardize = ""}).tokenize("Hi,\tThere!\n") == Strings{"Hi,", "There!"});
  // Every ASCII punctuation character of Keras' regex, '-' (inside the ',-.' range) included.
  CHECK(TextVectorization().tokenize("a-b_c'd\"e[f]g\\h`i~j") == Strings{"abcdefghij"});
  // split "character": UTF-8 code points ("é" is two bytes, one character); None: the whole text.
  CHECK(TextVectorization({.standardize = "", .split = "character"}).tokenize("ab \xc3\xa9") == Strings{"a", "b", " ", "\xc3\xa9"});
  CHECK(TextVectorization({.split = ""}).tokenize("A b") == Strings{"a b"});
  // ngrams = 2: the 1-grams, then the 2-grams (tf.strings.ngrams, separator " ").
  CHECK(TextVectorization({.ngrams = 2}).tokenize("a b c") == Strings{"a", "b", "c", "a b", "b c"});
  CHECK(TextVectorization({.ngrams = {2}}).tokenize("a b c") == Strings{"a b", "b c"});
  CHECK(TextVectorization({.ngrams = 3}).tokenize("a b") == Strings{"a", "b", "a b"});  // too short for 3
  CHECK(TextVectorization().tokenize("  ").empty());
  CHECK_THROWS_AS(TextVectorization({.standardize = "upper"}), ValueError);
  CHECK_THROWS_AS(TextVectorization({.split = "comma"}), ValueError);
  CHECK_THROWS_AS(TextVectorization({.ngrams = 0}), ValueError);
}

TEST_CASE("TextVectorization int mode: vocabulary, adapt, padding", "[text][vectorization]") {
  // Keras docs: vocabulary ["earth", "wind", "and", "fire"] -> ["", "[UNK]", earth, wind, and, fire].
  TextVectorization given({.output_sequence_length = 4, .vocabulary = {"earth", "wind", "and", "fire"}});
  CHECK(given.get_vocabulary() == Strings{"", "[UNK]", "earth", "wind", "and", "fire"});
  // Docs: ["foo qux bar", "qux baz"] -> [[1,1,1,0],[1,1,0,0]].
  CHECK(ids(given(Strings{"foo qux bar", "qux baz"})) == std::vector<std::int64_t>{1, 1, 1, 0, 1, 1, 0, 0});
  // Truncated to output_sequence_length: "The Earth, wind and FIRE!" -> the earth wind and fire.
  CHECK(ids(given(Strings{"The Earth, wind and FIRE!"})) == std::vector<std::int64_t>{1, 2, 3, 4});
  // adapt: the 3, cat 2, sat 2, dog 1 -> the, sat, cat (tie: descending), dog.
  TextVectorization v;
  v.adapt(Strings{"The cat sat.", "The dog sat!", "the cat"});
  CHECK(v.get_vocabulary() == Strings{"", "[UNK]", "the", "sat", "cat", "dog"});
  // Without output_sequence_length rows are padded with 0 to the longest.
  const Tensor out = v(Strings{"the cat", "dog", "bird dog cat"});
  REQUIRE(out.shape() == Shape{3, 3});
  CHECK(ids(out) == std::vector<std::int64_t>{2, 4, 0, 5, 0, 0, 1, 5, 4});
  CHECK(v(Strings{}).shape() == Shape{0, 0});
  CHECK(v(Strings{""}).shape() == Shape{1, 0});
  // max_tokens counts the padding and OOV entries.
  TextVectorization small({.max_tokens = 4});
  small.adapt(Strings{"The cat sat.", "The dog sat!", "the cat"});
  CHECK(small.get_vocabulary() == Strings{"", "[UNK]", "the", "sat"});
  // adapt on a Dataset of text batches.
  const std::vector<Strings> batches = {{"b b a"}, {"c b"}};
  auto ds = data::Dataset<Strings>::from_generator([&batches, i = std::size_t{0}]() mutable -> std::optional<Strings> {
    if (i == batches.size()) return std::nullopt;
    return batches[i++];
  });
  TextVectorization from_ds;
  from_ds.adapt(ds);
  CHECK(from_ds.get_vocabulary() == Strings{"", "[UNK]", "b", "c", "a"});
  CHECK_THROWS_AS(v(constant<float>({1.0f}, Shape{1})), ValueError);  // tensors hold no strings
  CHECK_THROWS_AS(TextVectorization({.max_tokens = 1}), ValueError);
  CHECK_THROWS_AS(TextVectorization({.output_sequence_length = -1}), ValueError);
}

TEST_CASE("TextVectorization multi_hot, count and tf_idf", "[text][vectorization]") {
  // Vocabulary outside int mode: [UNK] first, no padding entry.
  TextVectorization mh({.output_mode = "multi_hot", .vocabulary = {"a", "b", "c"}});
  CHECK(mh.get_vocabulary() == Strings{"[UNK]", "a", "b", "c"});
  CHECK(floats(mh(Strings{"a c c z", ""})) == std::vector<float>{1, 1, 0, 1, 0, 0, 0, 0});
  TextVectorization count({.output_mode = "count", .vocabulary = {"a", "b", "c"}});
  CHECK(floats(count(Strings{"a c c z"})) == std::vector<float>{1, 1, 0, 2});
  TextVectorization padded({.max_tokens = 6, .output_mode = "multi_hot", .pad_to_max_tokens = true, .vocabulary = {"a", "b", "c"}});
  CHECK(floats(padded(Strings{"a c c z"})) == std::vector<float>{1, 1, 0, 1, 0, 0});
  // tf_idf after adapt on ["a a b", "a c"]: counts a 3, b 1, c 1 -> [UNK], a, c, b. With 2
  // documents idf = log(1 + 2 / (1 + df)): a (df 2) log(5/3), b and c (df 1) log(2); the OOV
  // entry gets their mean. "a a b z" -> [1 * mean, 2 * log(5/3), 0 (c), 1 * log(2)].
  TextVectorization tfidf({.output_mode = "tf_idf"});
  tfidf.adapt(Strings{"a a b", "a c"});
  CHECK(tfidf.get_vocabulary() == Strings{"[UNK]", "a", "c", "b"});
  const double ia = std::log(5.0 / 3.0), ib = std::log(2.0), mean = (ia + 2 * ib) / 3;
  const std::vector<float> got = floats(tfidf(Strings{"a a b z"}));
  REQUIRE(got.size() == 4);
  CHECK(got[0] == Approx(mean));
  CHECK(got[1] == Approx(2 * ia));
  CHECK(got[2] == 0.0f);
  CHECK(got[3] == Approx(ib));
  CHECK_THROWS_AS(TextVectorization({.output_mode = "multi_hot", .output_sequence_length = 3}), ValueError);
  CHECK_THROWS_AS(TextVectorization({.output_mode = "one_hot"}), ValueError);
  CHECK_THROWS_AS(TextVectorization({.output_mode = "multi_hot", .pad_to_max_tokens = true}), ValueError);
}

TEST_CASE("Text preprocessing layers round-trip through their configs", "[text][config]") {
  const Strings texts = {"The cat sat.", "The dog sat!", "the cat", "a bird"};
  TextVectorization v({.max_tokens = 20, .ngrams = 2, .output_mode = "tf_idf"});
  v.adapt(texts);
  const auto v2 = std::dynamic_pointer_cast<TextVectorization>(from_config("TextVectorization", v.get_config()));
  REQUIRE(v2);
  CHECK(v2->get_vocabulary() == v.get_vocabulary());
  CHECK(floats((*v2)(texts)) == floats(v(texts)));
  CHECK(v.get_config()["ngrams"] == 2);

  TextVectorization iv({.standardize = "", .split = "character", .output_sequence_length = 5});
  iv.adapt(texts);
  const auto iv2 = std::dynamic_pointer_cast<TextVectorization>(from_config("TextVectorization", iv.get_config()));
  REQUIRE(iv2);
  CHECK(iv2->options().standardize.empty());
  CHECK(ids((*iv2)(texts)) == ids(iv(texts)));

  StringLookup s({.mask_token = "", .vocabulary = {"a", "b"}});
  const auto s2 = std::dynamic_pointer_cast<StringLookup>(from_config("StringLookup", s.get_config()));
  REQUIRE(s2);
  CHECK(s2->get_vocabulary() == s.get_vocabulary());
  CHECK(ids((*s2)(Strings{"", "b", "x"})) == ids(s(Strings{"", "b", "x"})));

  IntegerLookup i({.num_oov_indices = 2, .vocabulary = {5, 7}, .output_mode = "count"});
  const auto i2 = from_config("IntegerLookup", i.get_config());
  const Tensor x = constant<std::int64_t>({5, 7, 7, 9}, Shape{4});
  CHECK(floats((*i2)(x)) == floats(i(x)));

  CategoryEncoding c(5, {.output_mode = "count"});
  const auto c2 = from_config("CategoryEncoding", c.get_config());
  const Tensor small = constant<std::int64_t>({0, 2, 2, 4}, Shape{4});
  CHECK(floats((*c2)(small)) == floats(c(small)));

  Hashing h(11, {.mask_value = "", .salt = {3, 4}});
  const auto h2 = std::dynamic_pointer_cast<Hashing>(from_config("Hashing", h.get_config()));
  REQUIRE(h2);
  CHECK(ids((*h2)(Strings{"a", "", "q"})) == ids(h(Strings{"a", "", "q"})));
  // Keras' int salt keys both halves.
  auto cfg = h.get_config();
  cfg["salt"] = 3;
  const auto h3 = std::dynamic_pointer_cast<Hashing>(from_config("Hashing", cfg));
  CHECK(h3->options().salt == std::vector<std::uint64_t>{3, 3});
}
