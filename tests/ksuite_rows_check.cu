// Host program (tests/test_ksuite_rows.py builds and runs it; no GPU): the
// any-alignment helpers of ksuite/rows.cuh and the index map of
// residual_layernorm_gelu's plans 18 and 19 (rlg_unaligned_kernel), for every
// row misalignment of float32 and 16-bit rows up to 40000 columns.
//  - join_words puts together the 16 bytes at any element from the words
//    ld16_words_if reads, and every word it reads overlaps those 16 bytes;
//  - split_row: a head of < VEC elements, a body of whole packs on 16-byte
//    boundaries, head + tail <= 2 (VEC - 1) elements;
//  - the kernel's threads (plan_regs for the body's packs, at least 2 VEC
//    lanes, <= 1024 threads at 4 packs and 512 at 8) write every column of a
//    row exactly once: body packs at head + (p * tpr + t) * VEC, edge
//    element t at edge_col(t).
// Prints "ok" and exits 0, else the first failures.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ksuite/rows.cuh"

static int fails = 0;
#define EXPECT(c, ...)                                    \
  do {                                                    \
    if (!(c) && fails++ < 20) {                           \
      std::printf("FAIL line %d: ", __LINE__);            \
      std::printf(__VA_ARGS__);                           \
      std::printf("\n");                                  \
    }                                                     \
  } while (0)

template <typename T>
void check_words() {
  std::mt19937 rng(1);
  alignas(16) unsigned char mem[96];
  for (int trial = 0; trial < 200; ++trial) {
    for (auto& c : mem) c = rng() & 255;
    for (int e = 0; 16 + e * int(sizeof(T)) + 20 <= int(sizeof(mem)); ++e) {  // its words inside mem
      const T* p = reinterpret_cast<const T*>(mem + 16) + e;
      // ld16_words_if's addresses
      const auto a = reinterpret_cast<std::uintptr_t>(p);
      const uint32_t* wp = reinterpret_cast<const uint32_t*>(a & ~std::uintptr_t(3));
      const uint32_t odd = static_cast<uint32_t>(a) & 2u;
      uint32_t w[5];
      for (int i = 0; i < 4; ++i) std::memcpy(&w[i], wp + i, 4);
      if (sizeof(T) == 2 && odd) std::memcpy(&w[4], wp + 4, 4); else w[4] = 0xdeadbeefu;  // unread
      for (int i = 0; i < (odd ? 5 : 4); ++i) {
        const auto lo = reinterpret_cast<std::uintptr_t>(wp + i);
        EXPECT(lo + 4 > a && lo < a + 16, "size %d elem %d: word %d outside the 16 bytes", int(sizeof(T)), e, i);
      }
      const uint4 out = ksuite::join_words<T>(w, odd);
      EXPECT(std::memcmp(&out, p, 16) == 0, "size %d elem %d: join_words", int(sizeof(T)), e);
    }
  }
}

template <typename T, int PACKS>
void check_rows(int max_n) {
  constexpr int VEC = ksuite::vec16<T>();
  const int bound = PACKS <= 4 ? 1024 : 512;  // rlg_rows.cuh's unaligned_max_threads
  alignas(16) static char arena[64];
  std::vector<int> hits;
  for (int n = 1; n <= max_n; n = n < 300 ? n + 1 : n + n / 20 + 1) {
    const ksuite::RegPlan plan = ksuite::plan_regs(n / VEC * VEC, VEC, PACKS, bound);
    if (plan.tpr == 0) continue;
    const int tpr = std::max(plan.tpr, 2 * VEC);  // launch_unaligned_rows
    EXPECT(tpr <= 32 ? plan.threads == 256 && tpr % (2 * VEC) == 0 : tpr == plan.threads && tpr <= bound,
           "n %d: %d threads a row", n, tpr);
    for (int mis = 0; mis < 16; mis += sizeof(T)) {
      const T* row = reinterpret_cast<const T*>(arena + 16 + mis);
      const ksuite::RowSplit s = ksuite::split_row(row, n);
      EXPECT(s.head >= 0 && s.head < VEC && s.body >= 0 && s.body <= n / VEC && s.edges <= 2 * VEC - 2,
             "n %d mis %d: head %d body %d edges %d", n, mis, s.head, s.body, s.edges);
      hits.assign(n, 0);
      for (int t = 0; t < tpr; ++t) {
        for (int p = 0; p < PACKS; ++p) {
          if (p * tpr + t >= s.body) continue;
          const int c = s.head + t * VEC + p * tpr * VEC;
          EXPECT((reinterpret_cast<std::uintptr_t>(row) + c * sizeof(T)) % 16 == 0, "n %d mis %d: pack off a boundary",
                 n, mis);
          for (int k = 0; k < VEC; ++k)
            if (c + k < n) ++hits[c + k]; else EXPECT(false, "n %d mis %d: column %d", n, mis, c + k);
        }
        if (t < s.edges) {
          const int col = s.edge_col(t);
          if (col >= 0 && col < n) ++hits[col]; else EXPECT(false, "n %d mis %d: edge column %d", n, mis, col);
        }
      }
      for (int i = 0; i < n; ++i) EXPECT(hits[i] == 1, "n %d mis %d: column %d written %d times", n, mis, i, hits[i]);
    }
  }
}

int main() {
  check_words<float>();
  check_words<c10::BFloat16>();
  check_words<c10::Half>();
  check_rows<float, 4>(40000);
  check_rows<float, 8>(40000);
  check_rows<c10::BFloat16, 4>(40000);
  check_rows<c10::BFloat16, 8>(40000);
  alignas(16) static const float some[4] = {};
  const ksuite::RowSplit empty = ksuite::split_row(some + 1, 0);
  EXPECT(empty.head == 0 && empty.body == 0 && empty.edges == 0, "empty row");
  if (fails) {
    std::printf("%d failures\n", fails);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
