// PyTorch's CPU allocator for a rank whose steps allocate blocks of its part's size, the same ones every step
// (full-graph training and its evaluation). Built and loaded by held_memory.py; its C functions are the interface.
//
// Requests of at least `min_bytes` within a step (between sylvie_step_begin and sylvie_step_end) follow a plan. The
// second step of a kind (the first may allocate once-only blocks) is recorded: each request's size and how many
// requests had been made when it was freed. At its end every block taken and freed within the step gets an offset in
// one arena, blocks alive at the same time never sharing bytes, packed as tightly as a few greedy orders find. Later
// steps of that kind take the k-th request's block at the k-th offset: no block from the system, no page faulted in.
//
// A block is never handed out over bytes in use. When a planned block's bytes are still held by one the plan had
// freed by then, the request waits for it a little (a collective's worker thread lets go of its buffers when it is
// done), then takes free bytes of the arena elsewhere, or a held block, or the system; the plan learns every block's
// longer life at the step's end (re-planned: lives only grow, so it settles). A step whose requests differ from the
// record (a size, their number) leaves the plan for its remaining requests, and the next step of the kind records
// anew (three times at most, then the kind goes unplanned). Steps of different kinds share the arena, one at a time.
//
// Requests outside a step, and blocks that outlived their step when recorded, never take arena bytes (they would
// sit on a plan's): they are served from blocks held when freed, of exactly their size, else from the system. What
// is held is bounded: the arena plus other blocks in use plus held blocks never exceed the most ever asked for at
// once, as far as giving back held blocks (the longest held first) can keep them there, nor take the process's
// resident memory past its high-water mark; held blocks go back whenever a step has been recorded. So the process's
// peak is the one it had with nothing held, unless the plan's packing needs more than the most asked for at once.
// Smaller requests go to the allocator this one replaces.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr size_t kPage = size_t(1) << 12;  // sizes are rounded up to whole 4 KB pages
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr size_t kNowhere = std::numeric_limits<size_t>::max();
constexpr auto kPlannedWait = std::chrono::milliseconds(5);  // the longest a request waits for its planned bytes
constexpr int kPackingTrials = 200;  // random orders a plan's packing also tries
constexpr int kSwapTrials = 2000;    // and swaps of two blocks in the best order
constexpr int kMaxRecordings = 3;  // recordings of one kind of step before it goes unplanned

struct Counters {
  uint64_t planned = 0, hits = 0, misses = 0;  // requests served from the arena, from held blocks, from the system
  uint64_t arena = 0, in_use = 0, held = 0;    // bytes: the arena (what plans use of it), other blocks in use, held
  uint64_t asked = 0, peak_asked = 0;          // bytes asked for by the requests in use, the most ever at once
  uint64_t recorded = 0, replanned = 0, left = 0;  // steps recorded, re-planned, that left their plan
  uint64_t waits = 0;  // requests that waited for their planned bytes to be freed
  uint64_t least = 0;  // the largest plan's least bytes (the most its blocks are alive with at once)
};

struct Use {
  size_t size;    // the block's bytes (0: in the arena)
  size_t asked;   // what the request asked for
  int64_t step;   // the step it was taken in
  int64_t index;  // its request number in that step (-1: outside a step)
  size_t offset;  // in the arena
};

struct Planned {
  size_t size = 0;
  size_t offset[2] = {0, 0};  // in the arena, in steps of even and odd parity
  uint64_t freed_at = kNever;  // requests made when it was freed (its life: requests index .. freed_at - 1)
  // a block that outlives its step (a pipelined round's halo rows, kept for the next): the requests the next step of
  // the kind has made when it is freed, if it is freed then, before that step takes its own (kNever: not known, or
  // it lives on: served as any request, off the arena)
  uint64_t next_freed_at = kNever;
  bool lives_on = false;  // seen outliving the next step too: never planned across steps
  bool within() const { return freed_at != kNever; }
  bool crosses() const { return !within() && !lives_on && next_freed_at != kNever; }  // into the next step
  bool in_arena() const { return within() || crosses(); }
};

struct Live {  // an arena block in use
  size_t end;
  int64_t index;  // its planned request number (-1: off the plan)
  int64_t step;   // the step that took it
};

struct Plan {
  std::vector<Planned> blocks;
  size_t arena_bytes = 0;
  size_t least_bytes = 0;  // the most its blocks are alive with at once (no arena can be smaller)
  uint64_t replays = 0;  // steps that followed it (their parity picks the offsets)
};

class HeldBlocks final : public c10::Allocator {
 public:
  HeldBlocks(c10::Allocator* small, size_t min_bytes) : small_(small), min_bytes_(min_bytes) {}

  c10::DataPtr allocate(size_t n) override {
    if (n < min_bytes_) {
      return small_->allocate(n);
    }
    void* p = take((n + kPage - 1) / kPage * kPage);
    return {p, p, &HeldBlocks::release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &HeldBlocks::release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static void release(void* p) { instance->give_back(p); }

  Counters counters() {
    std::lock_guard<std::mutex> lock(mutex_);
    return counters_;
  }

  void step_begin(int64_t kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    // the blocks of the kind's previous step freed in this one tell how long they live into it, if that step
    // followed or made the kind's plan
    auto last = last_.find(kind);
    bool follows = kind >= 0 && last != last_.end() && last->second.followed;
    prev_step_ = follows ? last->second.step : -1;
    prev_freed_at_.assign(follows ? last->second.requests : 0, kNever);
    ++step_;
    in_step_ = true;
    kind_ = kind;
    requests_ = off_plan_ = 0;
    mode_ = kNone;
    sizes_.clear();
    freed_at_.clear();
    if (kind < 0 || ++seen_[kind] == 1) {  // unplanned, or the kind's first step (once-only blocks)
      return;
    }
    auto plan = plans_.find(kind);
    if (plan == plans_.end()) {
      if (recordings_[kind] < kMaxRecordings) {
        ++recordings_[kind];
        mode_ = kRecord;
      }
      return;
    }
    if (capacity_ < plan->second.arena_bytes) {
      if (!live_.empty()) {  // the arena cannot move while blocks of it are in use: not planned this time
        return;
      }
      grow_arena(plan->second.arena_bytes);
    }
    mode_ = kReplay;
    replaying_ = &plan->second;
    parity_ = plan->second.replays++ % 2;
    freed_at_.assign(plan->second.blocks.size(), kNever);
  }

  void step_end() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mode_ == kRecord) {
      Plan plan;
      plan.blocks.resize(sizes_.size());
      for (size_t k = 0; k < sizes_.size(); ++k) {
        plan.blocks[k].size = sizes_[k];
        plan.blocks[k].freed_at = freed_at_[k];
      }
      place(plan);
      plans_[kind_] = std::move(plan);
      ++counters_.recorded;
      drop_all_held();  // the recorded step's blocks: the arena takes their place
    } else if (mode_ == kReplay) {
      if (learn(*replaying_)) {
        place(*replaying_);
        ++counters_.replanned;
      }
    } else if (mode_ == kLeft) {
      ++counters_.left;
      plans_.erase(kind_);  // recorded again next time
    }
    counters_.least = 0;
    for (auto& [kind, plan] : plans_) {
      counters_.least = std::max<uint64_t>(counters_.least, plan.least_bytes);
    }
    while (!by_age_.empty() && total() > counters_.peak_asked) {  // a plan grew: fewer held blocks
      evict_oldest();
    }
    if (kind_ >= 0) {
      last_[kind_] = {step_, requests_, mode_ == kRecord || mode_ == kReplay};
    }
    in_step_ = false;
    mode_ = kNone;
    replaying_ = nullptr;
  }

  static HeldBlocks* instance;

 private:
  enum Mode { kNone, kRecord, kReplay, kLeft };

  // What a step that followed its plan teaches it: when a request could not have its planned bytes (a block before it
  // lived longer than planned, or outlived the step), every block's life as long as it was this time; and how long
  // the previous step's blocks that outlived it lived into this one. Whether the plan changed.
  bool learn(Plan& plan) {
    bool changed = false;
    if (off_plan_ != 0) {
      for (size_t k = 0; k < freed_at_.size(); ++k) {
        Planned& b = plan.blocks[k];
        if (b.within() && (freed_at_[k] == kNever || freed_at_[k] > b.freed_at)) {
          b.freed_at = freed_at_[k];
          changed = true;
        }
      }
    }
    if (prev_freed_at_.size() == plan.blocks.size()) {
      for (size_t k = 0; k < plan.blocks.size(); ++k) {
        Planned& b = plan.blocks[k];
        uint64_t seen = prev_freed_at_[k];
        if (b.within() || b.lives_on) {
          continue;
        }
        if (seen == kNever) {  // still in use: it lives beyond the next step
          b.lives_on = true;
          changed = changed || b.next_freed_at != kNever;
        } else if (b.next_freed_at == kNever || seen > b.next_freed_at) {
          b.next_freed_at = seen;
          changed = true;
        }
      }
    }
    return changed;
  }

  using Age = std::list<std::pair<size_t, void*>>;  // held blocks, the longest held first

  void* take(size_t size) {
    std::unique_lock<std::mutex> lock(mutex_);
    int64_t index = (mode_ == kNone) ? -1 : int64_t(requests_++);
    size_t limit = touched_;  // the arena's bytes a request may take without faulting new pages in
    bool within_step = in_step_;  // (blocks taken outside a step, or that outlive it, stay out of the arena)
    if (mode_ == kRecord) {
      sizes_.push_back(size);
      freed_at_.push_back(kNever);
    } else if (mode_ == kReplay) {
      const std::vector<Planned>& blocks = replaying_->blocks;
      limit = std::max<size_t>(limit, replaying_->arena_bytes);
      if (size_t(index) >= blocks.size() || blocks[size_t(index)].size != size) {
        mode_ = kLeft;  // not the recorded requests
      } else if (!blocks[size_t(index)].in_arena()) {
        within_step = false;
      } else if (planned_range_free(lock, blocks[size_t(index)].offset[parity_], size)) {
        ++counters_.planned;
        return in_arena(blocks[size_t(index)].offset[parity_], size, index, true);
      } else {
        ++off_plan_;
      }
    }
    // off the plan: where the arena has room now (a block of this step), else a held block or the system
    size_t at = within_step ? first_fit(size, limit) : kNowhere;
    if (at != kNowhere) {
      ++counters_.hits;
      return in_arena(at, size, index, false);
    }
    return from_held_or_system(size, index);
  }

  void* in_arena(size_t offset, size_t size, int64_t index, bool planned) {
    void* p = arena_ + offset;
    live_[offset] = {offset + size, planned ? index : -1, step_};
    touched_ = std::max(touched_, offset + size);
    counters_.arena = touched_;
    in_use_[p] = {0, size, step_, index, offset};
    add_asked(size);
    return p;
  }

  // Whether the planned bytes are free, waiting a little for them if the blocks in the way are planned ones that
  // should have been freed by now: such a block may be on its way back from another thread (a collective's worker
  // lets go of its buffers when it is done).
  bool planned_range_free(std::unique_lock<std::mutex>& lock, size_t offset, size_t size) {
    if (range_free(offset, size)) {
      return true;
    }
    for (auto it = live_.begin(); it != live_.end() && it->first < offset + size; ++it) {
      const Live& in_way = it->second;
      if (in_way.end > offset && !(in_way.index >= 0 && planned_freed(in_way))) {
        return false;  // not one the plan has freed by now: no use waiting
      }
    }
    ++waiting_;
    bool freed = freed_cv_.wait_for(lock, kPlannedWait, [&] { return range_free(offset, size); });
    --waiting_;
    ++counters_.waits;
    return freed;
  }

  // Whether the plan has freed a live arena block by now (this step's, or the previous one's living into it).
  bool planned_freed(const Live& b) const {
    const Planned& p = replaying_->blocks[size_t(b.index)];
    if (b.step == step_) {
      return p.within() && p.freed_at < requests_;
    }
    return b.step == prev_step_ && p.crosses() && p.next_freed_at < requests_;
  }

  bool range_free(size_t offset, size_t size) const {
    auto next = live_.upper_bound(offset);  // the first live block starting after offset
    if (next != live_.end() && next->first < offset + size) {
      return false;
    }
    return next == live_.begin() || std::prev(next)->second.end <= offset;
  }

  // The lowest offset below `limit` where `size` bytes of the arena are free now; kNowhere if none.
  size_t first_fit(size_t size, size_t limit) const {
    if (arena_ == nullptr) {
      return kNowhere;
    }
    size_t at = 0;
    for (auto& [start, block] : live_) {
      if (start >= at + size) {
        break;
      }
      at = std::max(at, block.end);
    }
    return at + size <= std::min(limit, capacity_) ? at : kNowhere;
  }

  void* from_held_or_system(size_t size, int64_t index) {
    auto it = by_size_.find(size);
    if (it != by_size_.end()) {
      void* p = it->second->second;
      by_age_.erase(it->second);
      by_size_.erase(it);
      counters_.held -= size;
      hand_out(p, size, index);
      ++counters_.hits;
      return p;
    }
    // the total may reach the most ever asked for at once (or what this request takes it to): give back the
    // longest-held blocks above that, and any that would take the resident memory past its high-water mark
    uint64_t bound = std::max(counters_.peak_asked, counters_.asked + size);
    while (!by_age_.empty() && total() + size > bound) {
      evict_oldest();
    }
    if (!by_age_.empty()) {
      uint64_t high = peak_resident();
      while (!by_age_.empty() && resident() + size > high) {
        evict_oldest();
      }
    }
    void* p = c10::alloc_cpu(size);  // throws (out of memory) as the default allocator does
    hand_out(p, size, index);
    ++counters_.misses;
    return p;
  }

  void hand_out(void* p, size_t size, int64_t index) {
    in_use_[p] = {size, size, step_, index, 0};
    counters_.in_use += size;
    add_asked(size);
  }

  void add_asked(size_t size) {
    counters_.asked += size;
    counters_.peak_asked = std::max(counters_.peak_asked, counters_.asked);
  }

  void give_back(void* p) {
    if (p == nullptr) {
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_use_.find(p);
    if (it == in_use_.end()) {  // a small block (raw_deleter serves both kinds)
      c10::free_cpu(p);
      return;
    }
    Use use = it->second;
    in_use_.erase(it);
    counters_.asked -= use.asked;
    if (use.step == step_ && use.index >= 0 && size_t(use.index) < freed_at_.size()) {
      freed_at_[size_t(use.index)] = requests_;  // (recording, or replaying: its life this time)
    } else if (use.step == prev_step_ && use.index >= 0 && size_t(use.index) < prev_freed_at_.size()) {
      prev_freed_at_[size_t(use.index)] = requests_;  // (one of the previous step's, freed in this one)
    }
    if (use.size == 0) {  // in the arena
      live_.erase(use.offset);
      if (waiting_ != 0) {
        freed_cv_.notify_all();
      }
      return;
    }
    counters_.in_use -= use.size;
    counters_.held += use.size;
    by_age_.emplace_back(use.size, p);
    by_size_.emplace(use.size, std::prev(by_age_.end()));
  }

  // Offsets for the plan's arena blocks such that blocks alive at the same time never share bytes, in as small an
  // arena as a few greedy packings find (each block in turn, in one of four orders, at the lowest offset free of
  // the blocks placed before it that are alive with it, or in the smallest such gap it fits).
  // The arena's blocks of a plan over two steps of its kind (requests 0 .. 2n - 1, n a step's), each block once in
  // each: one taken and freed within its step is alive for a part of it, one that lives into the next step until it
  // is freed there. Each has an offset for steps of even parity and one for odd, so that a block alive across two
  // steps and its successor, alive at the same time, take turns.
  struct Item {
    size_t k;
    int parities;  // 1: even steps, 2: odd steps
    size_t size;
    std::vector<std::pair<uint64_t, uint64_t>> life;  // [from, to) ranges of the two steps' requests
    uint64_t length() const {
      uint64_t n = 0;
      for (auto [from, to] : life) {
        n += to - from;
      }
      return n;
    }
  };

  static std::vector<Item> items(const Plan& plan) {
    std::vector<Item> out;
    uint64_t n = plan.blocks.size();
    for (size_t k = 0; k < n; ++k) {
      const Planned& b = plan.blocks[k];
      if (b.within()) {
        out.push_back({k, 1, b.size, {{k, b.freed_at}}});
        out.push_back({k, 2, b.size, {{n + k, n + b.freed_at}}});
      } else if (b.crosses()) {
        out.push_back({k, 1, b.size, {{k, n + b.next_freed_at}}});
        out.push_back({k, 2, b.size, {{n + k, 2 * n}, {0, b.next_freed_at}}});
      }
    }
    return out;
  }

  // Offsets for the plan's arena blocks such that blocks alive at the same time never share bytes, in as small an
  // arena as greedy packings find: each block in turn, at the lowest offset free of the blocks placed before it that
  // are alive with it (or in the smallest such gap it fits), in four orders, random variations of the first, then
  // the best order with pairs swapped while that helps (milliseconds for the ~100 blocks of a 3-layer step).
  static void place(Plan& plan) {
    std::vector<Item> all = items(plan);
    std::vector<size_t> order0(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      order0[i] = i;
    }
    std::vector<std::function<bool(size_t, size_t)>> orders = {
        [&](size_t a, size_t b) { return all[a].size > all[b].size; },
        [&](size_t a, size_t b) { return all[a].length() > all[b].length(); },
        [&](size_t a, size_t b) {
          return double(all[a].size) * all[a].length() > double(all[b].size) * all[b].length();
        },
        [&](size_t a, size_t b) { return all[a].life[0].first < all[b].life[0].first; }};
    std::vector<char> together(all.size() * all.size(), 0);  // alive at the same time, by pair
    for (size_t a = 0; a < all.size(); ++a) {
      for (size_t b = 0; b < all.size(); ++b) {
        for (auto [from_a, to_a] : all[a].life) {
          for (auto [from_b, to_b] : all[b].life) {
            together[a * all.size() + b] |= from_a < to_b && from_b < to_a;
          }
        }
      }
    }
    std::vector<size_t> best_offsets, best_order;
    size_t best = std::numeric_limits<size_t>::max();
    auto attempt = [&](const std::vector<size_t>& order) {
      size_t got = best;
      for (bool best_fit : {false, true}) {
        std::vector<size_t> offsets(all.size(), 0);
        size_t bytes = pack(all, together, order, best_fit, offsets);
        if (bytes < best) {
          best = bytes;
          best_offsets = offsets;
          best_order = order;
        }
        got = std::min(got, bytes);
      }
      return got;
    };
    for (auto& order_by : orders) {
      std::vector<size_t> order = order0;
      std::stable_sort(order.begin(), order.end(), order_by);
      attempt(order);
    }
    // and orders by size with random swaps of neighbours (the same every time: a fixed seed)
    std::mt19937 random(12345);
    for (int trial = 0; trial < kPackingTrials && all.size() > 1; ++trial) {
      std::vector<size_t> order = order0;
      std::stable_sort(order.begin(), order.end(), orders[0]);
      for (size_t swaps = 0; swaps < order.size(); ++swaps) {
        size_t i = random() % (order.size() - 1);
        std::swap(order[i], order[i + 1]);
      }
      attempt(order);
    }
    // then the best order with two blocks swapped, kept where the arena is no larger, until none is smaller than
    // the most the blocks are alive with at once or the tries run out
    size_t least = load(all);
    std::vector<size_t> order = best_order;
    for (int trial = 0; trial < kSwapTrials && all.size() > 1 && best > least; ++trial) {
      size_t i = random() % order.size(), j = random() % order.size();
      std::swap(order[i], order[j]);
      if (attempt(order) > best) {
        std::swap(order[i], order[j]);
      }
    }
    plan.arena_bytes = all.empty() ? 0 : best;
    plan.least_bytes = least;
    for (size_t i = 0; i < all.size(); ++i) {
      for (int parity : {0, 1}) {
        if (all[i].parities & (1 << parity)) {
          plan.blocks[all[i].k].offset[parity] = best_offsets[i];
        }
      }
    }
  }

  // The most bytes the items are alive with at once: no packing needs less.
  static size_t load(const std::vector<Item>& all) {
    std::map<uint64_t, int64_t> change;  // request number -> bytes coming alive (+) and freed (-) there
    for (const Item& item : all) {
      for (auto [from, to] : item.life) {
        change[from] += int64_t(item.size);
        change[to] -= int64_t(item.size);
      }
    }
    int64_t alive = 0, most = 0;
    for (auto [at, bytes] : change) {
      alive += bytes;
      most = std::max(most, alive);
    }
    return size_t(most);
  }

  // One greedy packing of `order`: the arena's bytes, each item's offset in `offsets`.
  static size_t pack(const std::vector<Item>& all, const std::vector<char>& together, const std::vector<size_t>& order,
                     bool best_fit, std::vector<size_t>& offsets) {
    size_t bytes = 0;
    std::vector<size_t> placed;
    for (size_t i : order) {
      std::vector<std::pair<size_t, size_t>> busy;
      for (size_t j : placed) {
        if (together[i * all.size() + j]) {
          busy.emplace_back(offsets[j], offsets[j] + all[j].size);
        }
      }
      std::sort(busy.begin(), busy.end());
      size_t size = all[i].size, at = 0, chosen = 0, gap_of_chosen = 0;
      bool found = false;
      for (auto [start, end] : busy) {
        if (start >= at + size) {  // the gap [at, start) fits
          if (!best_fit) {
            chosen = at;
            found = true;
            break;
          }
          if (!found || start - at < gap_of_chosen) {
            chosen = at;
            gap_of_chosen = start - at;
            found = true;
          }
        }
        at = std::max(at, end);
      }
      offsets[i] = found ? chosen : at;
      bytes = std::max(bytes, offsets[i] + size);
      placed.push_back(i);
    }
    return bytes;
  }

  // An arena of at least `bytes` (no block of the old one in use): an eighth more is reserved, untouched (no
  // memory) until a plan grows into it.
  void grow_arena(size_t bytes) {
    free_arena();
    drop_all_held();
    capacity_ = bytes + bytes / 8;
    arena_ = static_cast<char*>(c10::alloc_cpu(capacity_));
  }

  void free_arena() {
    if (arena_ != nullptr) {
      c10::free_cpu(arena_);
    }
    arena_ = nullptr;
    capacity_ = touched_ = 0;
    counters_.arena = 0;
  }

  uint64_t total() const { return counters_.arena + counters_.in_use + counters_.held; }

  void drop_all_held() {
    while (!by_age_.empty()) {
      evict_oldest();
    }
  }

  static uint64_t resident() {  // bytes resident now (/proc/self/statm); 0 where it cannot be read
    uint64_t pages = 0, resident_pages = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) {
      return 0;
    }
    if (std::fscanf(f, "%lu %lu", &pages, &resident_pages) != 2) {
      resident_pages = 0;
    }
    std::fclose(f);
    return resident_pages * uint64_t(sysconf(_SC_PAGESIZE));
  }

  static uint64_t peak_resident() {  // the kernel's high-water mark of resident bytes
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return uint64_t(usage.ru_maxrss) * 1024;
  }

  void evict_oldest() {
    auto [size, p] = by_age_.front();
    auto range = by_size_.equal_range(size);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == by_age_.begin()) {
        by_size_.erase(it);
        break;
      }
    }
    by_age_.pop_front();
    counters_.held -= size;
    c10::free_cpu(p);
  }

  c10::Allocator* small_;
  size_t min_bytes_;
  std::mutex mutex_;
  Counters counters_;
  std::unordered_map<void*, Use> in_use_;
  Age by_age_;
  std::multimap<size_t, Age::iterator> by_size_;
  // steps and plans
  int64_t step_ = 0, kind_ = -1;
  uint64_t requests_ = 0;  // requests made in this step
  uint64_t off_plan_ = 0;  // planned requests of this step served elsewhere (their bytes were in use)
  Mode mode_ = kNone;
  bool in_step_ = false;
  uint64_t parity_ = 0;  // of this step among those that followed its plan
  std::vector<size_t> sizes_;       // recording: each request's size
  std::vector<uint64_t> freed_at_;  // recording, replaying: requests made when each was freed (kNever: in use)
  std::vector<uint64_t> prev_freed_at_;  // the same for the blocks of the kind's previous step freed in this one
  int64_t prev_step_ = -1;               // that step (-1: none that followed or made the plan)
  struct Last {
    int64_t step;
    uint64_t requests;
    bool followed;  // it followed or made the kind's plan (its requests are the plan's)
  };
  std::map<int64_t, Last> last_;  // each kind's last step
  std::map<int64_t, Plan> plans_;
  std::map<int64_t, int> seen_, recordings_;
  Plan* replaying_ = nullptr;
  char* arena_ = nullptr;
  size_t capacity_ = 0;      // the arena's bytes, untouched headroom included
  size_t touched_ = 0;          // the arena's bytes ever handed out (resident): the highest end of a block in it
  std::map<size_t, Live> live_;  // the arena's blocks in use, by offset
  std::condition_variable freed_cv_;  // an arena block was freed (for a request waiting on its planned bytes)
  int waiting_ = 0;
};

HeldBlocks* HeldBlocks::instance = nullptr;

}  // namespace

extern "C" {

// Make the held-block allocator torch's CPU allocator (once per process; later calls change nothing).
int sylvie_hold_blocks(uint64_t min_bytes) {
  if (HeldBlocks::instance != nullptr) {
    return 0;
  }
  HeldBlocks::instance = new HeldBlocks(c10::GetCPUAllocator(), min_bytes);  // lives as long as the process
  c10::SetCPUAllocator(HeldBlocks::instance, /*priority=*/200);
  return 1;
}

// A step of `kind` begins (kind < 0: a step that is not planned); its requests follow the kind's plan, or are
// recorded to make it.
void sylvie_step_begin(int64_t kind) {
  if (HeldBlocks::instance != nullptr) {
    HeldBlocks::instance->step_begin(kind);
  }
}

void sylvie_step_end() {
  if (HeldBlocks::instance != nullptr) {
    HeldBlocks::instance->step_end();
  }
}

// planned, hits, misses, arena, in_use, held, asked, peak_asked, recorded, replanned, left, waits, least (zeros before
// sylvie_hold_blocks)
void sylvie_held_counters(uint64_t* out) {
  Counters c = HeldBlocks::instance != nullptr ? HeldBlocks::instance->counters() : Counters();
  uint64_t values[13] = {c.planned, c.hits,       c.misses,   c.arena,     c.in_use, c.held, c.asked,
                         c.peak_asked, c.recorded, c.replanned, c.left, c.waits, c.least};
  std::memcpy(out, values, sizeof(values));
}
}
