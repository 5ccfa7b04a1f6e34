/* Times already found, looked up by a key of two 64-bit hashes of what was timed (a round's
 * transfers, a collective's shape): an open-addressing hash table.
 *
 * What was timed is not kept (a round of ZeRO-3 on 1,024 ranks is a million transfers), so two
 * different things with the same key would share a time. The two hashes are computed by
 * different functions (dt_memo_mix: xor, multiply, xor-shift; and a polynomial mod 2^64), so
 * for a collision both must collide at once: about n^2 / 2^129 for n things timed if the key
 * behaves as 128 random bits, under 10^-30 for the few thousand a search times. */
#ifndef DT_SIM_MEMO_H
#define DT_SIM_MEMO_H

#include <stdbool.h>
#include <stdint.h>

struct dt_memo_key {
    uint64_t a, b;
};

struct dt_memo_entry {
    struct dt_memo_key key;
    double s, busy;
    bool used;
};

struct dt_memo {
    struct dt_memo_entry *e; /* cap slots, a power of 2, at most half used */
    int n, cap;
};

/* The key of nothing yet. */
struct dt_memo_key dt_memo_start(void);
/* The key with v appended (inline: a round's key mixes three words per transfer). a: xor,
 * multiply by splitmix64's constant, fold the high bits down (a word at a time: FNV-1a byte by
 * byte was most of the time of a 1,024-rank ring's keys); b: b * K + v + 1. */
static inline struct dt_memo_key dt_memo_mix(struct dt_memo_key k, uint64_t v)
{
    uint64_t a = (k.a ^ v) * 0xbf58476d1ce4e5b9ULL;
    return (struct dt_memo_key){a ^ (a >> 31), k.b * 0x94d049bb133111ebULL + v + 1};
}

/* True, with the time kept under k, when there is one. */
bool dt_memo_recall(const struct dt_memo *m, struct dt_memo_key k, double *s, double *busy);
/* Keeps (s, busy) under k (replacing what k had); 0, or -1 out of memory. */
int dt_memo_remember(struct dt_memo *m, struct dt_memo_key k, double s, double busy);
void dt_memo_free(struct dt_memo *m);

#endif
