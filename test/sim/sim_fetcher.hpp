// The fetcher's side of the data reader's calls (fetcher_port), as src/fetch/fetcher.cpp carries
// them out, for both simulations (sim_world.cpp's one member, sim_group_data.cpp's members with
// --group --real-data): each call is posted to the background thread (post(), in order) and then
// applied to the fetcher's position table and chains. A change to fetcher.cpp's callbacks is
// mirrored here, once.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "consumer/data_reader.hpp"
#include "data/fetch_positions.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::sim {

class fetcher_calls : public detail::fetcher_port {
 public:
  // The three are the derived class's members: bound here, used only once it is constructed.
  fetcher_calls(data::fetch_positions& fp, detail::fetch_chains& chains, detail::shared_state& shared)
      : fp_(fp), chains_(chains), shared_(shared) {}

  void wake() override {
    post("wake", [this] { pump(); });
  }
  void refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    post(fmt::format("refetch {} {}", name(tp), offset), [this, tp, offset, epoch] {
      chains_.restart(tp);
      if (!fp_.refetch(tp, offset, epoch)) return;
      pump();
    });
  }
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    post(fmt::format("seek {} {} epoch {}", name(tp), offset, epoch), [this, tp, offset, epoch] {
      chains_.restart(tp);
      shared_.push(detail::position_event{tp, offset, false, epoch, true});
      if (!fp_.seek(tp, offset, epoch)) return;
      pump();
    });
  }
  void seek_to(const std::set<TopicPartition>& tps, bool beginning) override {
    post("seek_to", [this, tps, beginning] {
      for (const auto& tp : tps) {
        chains_.restart(tp);
        shared_.push(detail::position_event{tp, -1, false, -1, true});
        fp_.seek_to(tp, beginning);
      }
      pump();
    });
  }
  void pause(const std::set<TopicPartition>& tps) override {
    post("pause", [this, tps] {
      for (const auto& tp : tps) fp_.pause(tp);
    });
  }
  void resume(const std::map<TopicPartition, detail::epoch_offset>& positions) override {
    post("resume", [this, positions] {
      for (const auto& [tp, pos] : positions) {
        if (pos.offset >= 0) chains_.restart(tp);
        fp_.resume(tp, pos.offset, pos.epoch);
      }
      pump();
    });
  }
  void cut_accepted(const TopicPartition& tp, std::int64_t offset) override {
    post("cut_accepted", [this, tp, offset] {
      if (fp_.cut_accepted(tp, offset)) pump();
    });
  }
  void reset_position(const TopicPartition& tp) override {
    post(fmt::format("reset_position {}", name(tp)), [this, tp] {
      chains_.restart(tp);
      shared_.push(detail::position_event{tp, -1, false, -1, true});
      if (auto* p = fp_.find(tp)) fp_.offset_out_of_range(tp, *p);
      pump();
    });
  }

 protected:
  ~fetcher_calls() = default;
  /// Runs `f` on the background thread, after every call posted before it.
  virtual void post(std::string what, std::function<void()> f) = 0;
  /// fetcher::pump(): sends what the position table and the planner ask for.
  virtual void pump() = 0;

 private:
  static std::string name(const TopicPartition& tp) { return tp.topic + "-" + std::to_string(tp.partition); }
  data::fetch_positions& fp_;
  detail::fetch_chains& chains_;
  detail::shared_state& shared_;
};

}  // namespace kgroup::sim
