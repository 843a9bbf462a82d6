// The data reader's fetcher_port on the real fetcher: each call is posted onto the background
// thread, where the fetcher lives.
#pragma once

#include <functional>
#include <memory>

#include "consumer/data_reader.hpp"
#include "fetch/fetcher.hpp"

namespace kgroup::detail {

class posted_fetcher final : public fetcher_port {
 public:
  using post_fn = std::function<void(std::function<void()>)>;
  explicit posted_fetcher(post_fn post) : post_(std::move(post)) {}
  /// Before the background thread starts.
  void set_fetcher(std::shared_ptr<fetch::fetcher> f) { f_ = std::move(f); }

  /// Any call on the fetcher, on its thread.
  void run(std::function<void(fetch::fetcher&)> call) {
    post_([f = f_, call = std::move(call)] { call(*f); });
  }

  void wake() override {
    run([](fetch::fetcher& f) { f.wake(); });
  }
  void refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    run([=](fetch::fetcher& f) { f.refetch(tp, offset, epoch); });
  }
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    run([=](fetch::fetcher& f) { f.seek(tp, offset, epoch); });
  }
  void seek_to(const std::set<TopicPartition>& tps, bool beginning) override {
    run([=](fetch::fetcher& f) { f.seek_to(tps, beginning); });
  }
  void pause(const std::set<TopicPartition>& tps) override {
    run([=](fetch::fetcher& f) { f.pause(tps); });
  }
  void resume(const std::map<TopicPartition, epoch_offset>& positions) override {
    run([=](fetch::fetcher& f) { f.resume(positions); });
  }
  void cut_accepted(const TopicPartition& tp, std::int64_t offset) override {
    run([=](fetch::fetcher& f) { f.cut_accepted(tp, offset); });
  }
  void reset_position(const TopicPartition& tp) override {
    run([=](fetch::fetcher& f) { f.reset_position(tp); });
  }

 private:
  post_fn post_;
  std::shared_ptr<fetch::fetcher> f_;
};

}  // namespace kgroup::detail
