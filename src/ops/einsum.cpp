// einsum, tensordot and outer as compositions: per operand, diagonals ("ii") and axes no one
// else needs are taken first; then the operands contract left to right, each pair as one batched
// matmul ([batch, M, K] @ [batch, K, N]) between transposes and reshapes. Every step is a
// differentiable op, so the gradient is the einsum of the upstream gradient with the other
// operands without a rule of its own.
#include <algorithm>
#include <cctype>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/contraction.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

namespace {

// A label is a letter's code (its ASCII value) or, for the k-th of the ellipsis' E axes counted
// from the left, kEllipsis + k (ellipsis axes of operands with fewer axes align to the right).
constexpr int kEllipsis = 1000;
using Labels = std::vector<int>;

// One operand (or a partial result) with the label of each axis.
struct Term {
  Tensor t;
  Labels labels;
};

bool contains(const Labels& l, int label) { return std::find(l.begin(), l.end(), label) != l.end(); }

std::string label_name(int label) {
  return label >= kEllipsis ? fmt::format("...[{}]", label - kEllipsis) : std::string(1, static_cast<char>(label));
}

// The letters of one term and where its "..." stands (-1 when absent).
struct ParsedTerm {
  std::string letters;
  int ellipsis_at = -1;
};

ParsedTerm parse_term(const std::string& s, const std::string& equation) {
  ParsedTerm p;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "...") == 0) {
      if (p.ellipsis_at >= 0)
        throw ValueError(fmt::format("einsum: '{}' has more than one ellipsis in the term '{}'", equation, s));
      p.ellipsis_at = static_cast<int>(p.letters.size());
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(s[i]))) {
      p.letters.push_back(s[i]);
    } else {
      throw ValueError(fmt::format("einsum: '{}' has the character '{}' in a term; labels are letters and '...'",
                                   equation, s[i]));
    }
  }
  return p;
}

// The labels of a parsed term whose ellipsis covers `e` axes of the `total` ellipsis axes.
Labels expand(const ParsedTerm& p, int e, int total) {
  Labels l;
  for (int i = 0; i < static_cast<int>(p.letters.size()); ++i) {
    if (i == p.ellipsis_at)
      for (int k = total - e; k < total; ++k) l.push_back(kEllipsis + k);
    l.push_back(static_cast<unsigned char>(p.letters[static_cast<std::size_t>(i)]));
  }
  if (p.ellipsis_at == static_cast<int>(p.letters.size()))
    for (int k = total - e; k < total; ++k) l.push_back(kEllipsis + k);
  return l;
}

// Takes the diagonal of every label repeated within one term ("ii" -> "i"): x * I summed over the
// second axis, which keeps the gradient a plain composition.
void take_diagonals(Term& term, const std::string& equation) {
  for (std::size_t p = 0; p < term.labels.size(); ++p) {
    for (std::size_t q = p + 1; q < term.labels.size();) {
      if (term.labels[q] != term.labels[p]) {
        ++q;
        continue;
      }
      const std::int64_t n = term.t.shape()[static_cast<std::int64_t>(p)];
      if (term.t.shape()[static_cast<std::int64_t>(q)] != n)
        throw ShapeError(fmt::format("einsum: '{}' repeats label {} on axes of sizes {} and {} of one operand, shape {}",
                                     equation, label_name(term.labels[p]), n,
                                     term.t.shape()[static_cast<std::int64_t>(q)], term.t.shape().to_string()));
      std::vector<std::int64_t> eye_shape(term.labels.size(), 1);
      eye_shape[p] = n;
      eye_shape[q] = n;
      const Tensor mask = reshape(cast(eye(n), term.t.dtype()), Shape(eye_shape));
      term.t = reduce_sum(mul(term.t, mask), {static_cast<int>(q)});
      term.labels.erase(term.labels.begin() + static_cast<std::ptrdiff_t>(q));
    }
  }
}

// Sums the axes whose labels `needed` does not hold.
void sum_unneeded(Term& term, const Labels& needed) {
  std::vector<int> axes;
  Labels kept;
  for (std::size_t i = 0; i < term.labels.size(); ++i) {
    if (contains(needed, term.labels[i]))
      kept.push_back(term.labels[i]);
    else
      axes.push_back(static_cast<int>(i));
  }
  if (axes.empty()) return;
  term.t = reduce_sum(term.t, axes);
  term.labels = kept;
}

std::int64_t size_of(const Term& term, int label) {
  const auto it = std::find(term.labels.begin(), term.labels.end(), label);
  return term.t.shape()[it - term.labels.begin()];
}

// term's axes in the order of `order` (a permutation of its labels); no copy when already so.
Tensor permuted(const Term& term, const Labels& order) {
  std::vector<int> perm;
  for (int label : order)
    perm.push_back(static_cast<int>(std::find(term.labels.begin(), term.labels.end(), label) - term.labels.begin()));
  std::vector<int> identity(perm.size());
  std::iota(identity.begin(), identity.end(), 0);
  return perm == identity ? term.t : transpose(term.t, perm);
}

bool is_identity_order(const Term& term, const Labels& order) { return term.labels == order; }

std::int64_t labels_product(const Term& term, const Labels& labels) {
  std::int64_t n = 1;
  for (int l : labels) n *= size_of(term, l);
  return n;
}

// Contracts two terms, keeping the labels in `keep`: batch labels (in both, kept), contracted
// ones (in both, not kept), and each side's own. Size-1 ellipsis axes broadcast first.
Term contract(Term a, Term b, const Labels& keep, const std::string& equation) {
  Labels batch, summed, a_own, b_own;
  for (int l : a.labels) {
    if (contains(b.labels, l))
      (contains(keep, l) ? batch : summed).push_back(l);
    else
      a_own.push_back(l);
  }
  for (int l : b.labels)
    if (!contains(a.labels, l)) b_own.push_back(l);

  // Broadcast shared labels of unequal sizes (only ellipsis axes may differ, one of them 1).
  auto broadcast_shared = [&](Term& x, const Term& other) {
    std::vector<std::int64_t> dims = x.t.shape().dims();
    bool changed = false;
    for (std::size_t i = 0; i < x.labels.size(); ++i) {
      const int l = x.labels[i];
      if (!contains(other.labels, l)) continue;
      const std::int64_t mine = dims[i], theirs = size_of(other, l);
      if (mine == theirs) continue;
      if (l < kEllipsis || (mine != 1 && theirs != 1))
        throw ShapeError(fmt::format("einsum: '{}' gives label {} the sizes {} and {} in shapes {} and {}", equation,
                                     label_name(l), mine, theirs, x.t.shape().to_string(),
                                     other.t.shape().to_string()));
      if (mine == 1) {
        dims[i] = theirs;
        changed = true;
      }
    }
    if (changed) x.t = broadcast_to(x.t, Shape(dims));
  };
  broadcast_shared(a, b);
  broadcast_shared(b, a);

  // a as [batch, a_own, summed] (or [batch, summed, a_own] read transposed), b as
  // [batch, summed, b_own] (or [batch, b_own, summed] transposed): whichever needs no copy.
  auto cat = [](Labels x, const Labels& y, const Labels& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  const Labels a_plain = cat(batch, a_own, summed), a_trans = cat(batch, summed, a_own);
  const Labels b_plain = cat(batch, summed, b_own), b_trans = cat(batch, b_own, summed);
  const bool ta = !is_identity_order(a, a_plain) && is_identity_order(a, a_trans);
  const bool tb = !is_identity_order(b, b_plain) && is_identity_order(b, b_trans);
  const std::int64_t nb = labels_product(a, batch), m = labels_product(a, a_own), k = labels_product(a, summed), n = labels_product(b, b_own);
  // Without batch labels the product is 2-D (matmul's plain GEMM path, no batch loop).
  auto as_matrices = [&](const Tensor& t, std::int64_t rows, std::int64_t cols) {
    return batch.empty() ? reshape(t, {rows, cols}) : reshape(t, {nb, rows, cols});
  };
  const Tensor a3 = ta ? as_matrices(permuted(a, a_trans), k, m) : as_matrices(permuted(a, a_plain), m, k);
  const Tensor b3 = tb ? as_matrices(permuted(b, b_trans), n, k) : as_matrices(permuted(b, b_plain), k, n);
  const Tensor c = matmul(a3, b3, ta, tb);

  std::vector<std::int64_t> dims;
  Term out;
  for (int l : batch) dims.push_back(size_of(a, l));
  for (int l : a_own) dims.push_back(size_of(a, l));
  for (int l : b_own) dims.push_back(size_of(b, l));
  out.labels = cat(batch, a_own, b_own);
  out.t = reshape(c, Shape(dims));
  return out;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq.push_back(ch);
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<ParsedTerm> inputs;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    inputs.push_back(parse_term(lhs.substr(start, comma - start), equation));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (inputs.size() != operands.size())
    throw ValueError(fmt::format("einsum: '{}' has {} input terms but {} operands were given", equation, inputs.size(),
                                 operands.size()));

  // How many axes each ellipsis covers; the widest sets the output's ellipsis rank.
  int total = 0;
  std::vector<int> ell(inputs.size(), 0);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    detail::check_defined(operands[i], "einsum");
    const auto rank = static_cast<int>(operands[i].rank());
    const auto letters = static_cast<int>(inputs[i].letters.size());
    if (inputs[i].ellipsis_at < 0 ? rank != letters : rank < letters)
      throw ShapeError(fmt::format("einsum: '{}' gives operand {} {} labels{} but its shape {} has rank {}", equation, i,
                                   letters, inputs[i].ellipsis_at < 0 ? "" : " and an ellipsis",
                                   operands[i].shape().to_string(), rank));
    if (inputs[i].ellipsis_at >= 0) ell[i] = rank - letters;
    total = std::max(total, ell[i]);
  }
  std::vector<Term> terms;
  for (std::size_t i = 0; i < inputs.size(); ++i) terms.push_back({operands[i], expand(inputs[i], ell[i], total)});

  Labels output;
  if (arrow != std::string::npos) {
    const ParsedTerm out = parse_term(eq.substr(arrow + 2), equation);
    output = expand(out, out.ellipsis_at >= 0 ? total : 0, total);
    for (std::size_t i = 0; i < output.size(); ++i) {
      if (std::count(output.begin(), output.end(), output[i]) > 1)
        throw ValueError(fmt::format("einsum: '{}' repeats the output label {}", equation, label_name(output[i])));
      bool found = false;
      for (const Term& t : terms) found = found || contains(t.labels, output[i]);
      if (!found)
        throw ValueError(fmt::format("einsum: '{}' has the output label {} that no input has", equation,
                                     label_name(output[i])));
    }
  } else {
    // NumPy's implicit mode: the ellipsis axes, then each letter used once, alphabetically.
    for (int k = 0; k < total; ++k) output.push_back(kEllipsis + k);
    std::vector<int> count(128, 0);
    for (const ParsedTerm& p : inputs)
      for (char ch : p.letters) ++count[static_cast<unsigned char>(ch)];
    for (int ch = 0; ch < 128; ++ch)
      if (count[static_cast<std::size_t>(ch)] == 1) output.push_back(ch);
  }

  for (Term& t : terms) take_diagonals(t, equation);
  // Labels still needed by the output or by operand j onwards.
  auto needed_after = [&](std::size_t j) {
    Labels needed = output;
    for (std::size_t i = j; i < terms.size(); ++i) needed.insert(needed.end(), terms[i].labels.begin(), terms[i].labels.end());
    return needed;
  };
  for (std::size_t i = 0; i < terms.size(); ++i) {
    Labels others = output;
    for (std::size_t j = 0; j < terms.size(); ++j)
      if (j != i) others.insert(others.end(), terms[j].labels.begin(), terms[j].labels.end());
    sum_unneeded(terms[i], others);
  }
  Term acc = terms[0];
  for (std::size_t i = 1; i < terms.size(); ++i) {
    acc = contract(std::move(acc), terms[i], needed_after(i + 1), equation);
    sum_unneeded(acc, needed_after(i + 1));
  }
  // Output labels of size 1 that the accumulated term lacks cannot occur: each output label is
  // in some input and contraction keeps it. Order the axes as the output asks.
  return permuted(acc, output);
}

Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<std::vector<int>>& axes) {
  detail::check_defined(a, "tensordot");
  detail::check_defined(b, "tensordot");
  if (axes.size() != 2)
    throw ValueError(fmt::format("tensordot: axes must be two lists (a's axes, b's axes), got {} lists", axes.size()));
  if (axes[0].size() != axes[1].size())
    throw ValueError(fmt::format("tensordot: {} axes of a but {} axes of b; they pair up one to one", axes[0].size(),
                                 axes[1].size()));
  std::vector<int> ca, cb;
  std::vector<bool> a_used(static_cast<std::size_t>(a.rank()), false), b_used(static_cast<std::size_t>(b.rank()), false);
  for (std::size_t i = 0; i < axes[0].size(); ++i) {
    const int x = detail::normalize_axis(axes[0][i], a.rank(), "tensordot");
    const int y = detail::normalize_axis(axes[1][i], b.rank(), "tensordot");
    if (a_used[static_cast<std::size_t>(x)] || b_used[static_cast<std::size_t>(y)])
      throw ValueError("tensordot: an axis is contracted twice");
    if (a.shape()[x] != b.shape()[y])
      throw ShapeError(fmt::format("tensordot: axis {} of a {} has size {} but axis {} of b {} has size {}", axes[0][i],
                                   a.shape().to_string(), a.shape()[x], axes[1][i], b.shape().to_string(),
                                   b.shape()[y]));
    a_used[static_cast<std::size_t>(x)] = b_used[static_cast<std::size_t>(y)] = true;
    ca.push_back(x);
    cb.push_back(y);
  }
  std::vector<int> pa, pb;
  std::vector<std::int64_t> dims;
  std::int64_t m = 1, n = 1, k = 1;
  for (int d = 0; d < static_cast<int>(a.rank()); ++d)
    if (!a_used[static_cast<std::size_t>(d)]) {
      pa.push_back(d);
      dims.push_back(a.shape()[d]);
      m *= a.shape()[d];
    }
  for (int x : ca) {
    pa.push_back(x);
    k *= a.shape()[x];
  }
  pb = cb;
  for (int d = 0; d < static_cast<int>(b.rank()); ++d)
    if (!b_used[static_cast<std::size_t>(d)]) {
      pb.push_back(d);
      dims.push_back(b.shape()[d]);
      n *= b.shape()[d];
    }
  const Tensor a2 = reshape(a.rank() > 0 ? transpose(a, pa) : a, {m, k});
  const Tensor b2 = reshape(b.rank() > 0 ? transpose(b, pb) : b, {k, n});
  return reshape(matmul(a2, b2), Shape(dims));
}

Tensor tensordot(const Tensor& a, const Tensor& b, int axes) {
  detail::check_defined(a, "tensordot");
  detail::check_defined(b, "tensordot");
  if (axes < 0 || axes > a.rank() || axes > b.rank())
    throw ValueError(fmt::format("tensordot: axes = {} needs 0 <= axes <= the ranks of a {} and b {}", axes,
                                 a.shape().to_string(), b.shape().to_string()));
  std::vector<std::vector<int>> pairs(2);
  for (int i = 0; i < axes; ++i) {
    pairs[0].push_back(static_cast<int>(a.rank()) - axes + i);
    pairs[1].push_back(i);
  }
  return tensordot(a, b, pairs);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "outer");
  detail::check_defined(b, "outer");
  return mul(reshape(a, {a.size(), 1}), reshape(b, {1, b.size()}));
}

}  // namespace keel
