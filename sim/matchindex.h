/* The player's index of message matching: for every (rank, group, sequence, destination) key,
 * the activity that posted it and the chain of messages that arrived for it before their
 * receive was posted. A lookup replaces a scan over every activity and every undelivered
 * message (the player's hot loop at a thousand ranks). Keys: a collective or a receive has
 * destination -1; a SEND has its destination (one source sends the same tag and sequence
 * number to several ranks). */
#ifndef DT_SIM_MATCHINDEX_H
#define DT_SIM_MATCHINDEX_H

struct dt_match_entry {
    int rank, group, seq, dst;  /* the key */
    int act;                    /* the activity, or -1 while none is posted */
    int mail_head, mail_tail;   /* messages that came before the activity was posted, arrival
                                 * order (the activity then takes them over); -1 when none */
};

struct dt_match_index {
    struct dt_match_entry *slots;  /* open addressing, linear probing; rank -1 = empty */
    long cap, n;
};

void dt_match_init(struct dt_match_index *ix);
void dt_match_free(struct dt_match_index *ix);
/* The entry of the key, created (no activity, no mail) when absent; NULL when out of memory.
 * The pointer is valid until the next dt_match_get. */
struct dt_match_entry *dt_match_get(struct dt_match_index *ix, int rank, int group, int seq,
                                    int dst);
/* The entry of the key, or NULL. */
struct dt_match_entry *dt_match_find(const struct dt_match_index *ix, int rank, int group,
                                     int seq, int dst);

#endif
