#pragma once
// check_error<E>(f, parts): f() throws an E whose message contains every one of `parts` (the op,
// the shapes, the offending value).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

template <class E, class F>
void check_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL("no exception was thrown");
  } catch (const E& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    for (const auto& p : parts) CHECK_THAT(what, Catch::Contains(p));
  }
}
