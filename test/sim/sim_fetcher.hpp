// The fetcher's side of the data reader's calls (fetcher_port), for both simulations (sim_world.cpp's
// one member, sim_group_data.cpp's members with --group --real-data): each call is posted to the
// background thread (post(), in order) and then applied by the library's fetch::position_calls,
// as src/fetch/fetcher.cpp applies it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "consumer/data_reader.hpp"
#include "data/fetch_positions.hpp"
#include "fetch/position_calls.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::sim {

class fetcher_calls : public detail::fetcher_port {
 public:
  // The three are the derived class's members: bound here, used only once it is constructed.
  fetcher_calls(data::fetch_positions& fp, detail::fetch_chains& chains, detail::shared_state& shared)
      : calls_{fp, chains, shared} {}

  void wake() override {
    post("wake", [this] { pump(); });
  }
  void refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    post(fmt::format("refetch {} {}", name(tp), offset), [this, tp, offset, epoch] {
      if (calls_.refetch(tp, offset, epoch)) pump();
    });
  }
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    post(fmt::format("seek {} {} epoch {}", name(tp), offset, epoch), [this, tp, offset, epoch] {
      if (calls_.seek(tp, offset, epoch)) pump();
    });
  }
  void seek_to(const std::set<TopicPartition>& tps, bool beginning) override {
    post("seek_to", [this, tps, beginning] {
      if (calls_.seek_to(tps, beginning)) pump();
    });
  }
  void pause(const std::set<TopicPartition>& tps) override {
    post("pause", [this, tps] {
      if (calls_.pause(tps)) pump();
    });
  }
  void resume(const std::map<TopicPartition, detail::epoch_offset>& positions) override {
    post("resume", [this, positions] {
      if (calls_.resume(positions)) pump();
    });
  }
  void cut_accepted(const TopicPartition& tp, std::int64_t offset) override {
    post("cut_accepted", [this, tp, offset] {
      if (calls_.cut_accepted(tp, offset)) pump();
    });
  }
  void reset_position(const TopicPartition& tp) override {
    post(fmt::format("reset_position {}", name(tp)), [this, tp] {
      if (calls_.reset_position(tp)) pump();
    });
  }

 protected:
  ~fetcher_calls() = default;
  /// Runs `f` on the background thread, after every call posted before it.
  virtual void post(std::string what, std::function<void()> f) = 0;
  /// fetcher::pump(): sends what the position table and the planner ask for.
  virtual void pump() = 0;
  /// The library's side of the calls (also assign() and the delivery of a Fetch answer's slices).
  fetch::position_calls calls_;

 private:
  static std::string name(const TopicPartition& tp) { return tp.topic + "-" + std::to_string(tp.partition); }
};

}  // namespace kgroup::sim
