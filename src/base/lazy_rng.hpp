// A std::mt19937 made at its first draw (issue 37). The generator's state is 5,000 bytes, and
// the library keeps one in every retry schedule (base::backoff, for its jitter) and in every
// connection's setup (when to re-authenticate): an idle member carried 16 of them, about 80 KB of
// its heap, most of which never draws a number (no failure to back off from, no SASL session to
// renew). This holds the seed until the first draw, then the same std::mt19937 seeded with it:
// the numbers drawn are exactly those of a std::mt19937 constructed with the seed (the simulation's
// seeds replay unchanged).
#pragma once

#include <cstdint>
#include <memory>
#include <random>

namespace kgroup::base {

class lazy_mt19937 {
 public:
  using result_type = std::mt19937::result_type;

  explicit lazy_mt19937(std::uint32_t seed) noexcept : seed_(seed) {}
  lazy_mt19937(const lazy_mt19937& other)
      : seed_(other.seed_), gen_(other.gen_ ? std::make_unique<std::mt19937>(*other.gen_) : nullptr) {}
  lazy_mt19937& operator=(const lazy_mt19937& other) {
    if (this != &other) *this = lazy_mt19937(other);
    return *this;
  }
  lazy_mt19937(lazy_mt19937&&) noexcept = default;
  lazy_mt19937& operator=(lazy_mt19937&&) noexcept = default;
  ~lazy_mt19937() = default;

  static constexpr result_type min() { return std::mt19937::min(); }
  static constexpr result_type max() { return std::mt19937::max(); }

  result_type operator()() {
    if (!gen_) gen_ = std::make_unique<std::mt19937>(seed_);
    return (*gen_)();
  }

  /// Whether a number was drawn yet (the generator exists); for tests.
  [[nodiscard]] bool started() const noexcept { return gen_ != nullptr; }

 private:
  std::uint32_t seed_;
  std::unique_ptr<std::mt19937> gen_;
};

}  // namespace kgroup::base
