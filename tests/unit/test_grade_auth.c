/* Tests of the authenticated result channel (src/grade/auth.h): frames made with the key are
 * accepted in order, split anywhere across reads; a forged tag, a wrong key, a replayed or
 * reordered frame, garbage before a frame and a truncated tail are all refused, and nothing after
 * the first bad frame is trusted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade/auth.h"

static uint8_t K[MKB_AUTH_KEY_BYTES];

static void setup(void) {
    for (int i = 0; i < MKB_AUTH_KEY_BYTES; i++) K[i] = (uint8_t)(i * 7 + 1);
}

TestSuite(auth, .init = setup);

static char *frame(uint64_t seq, const char *body, size_t *len) {
    char *f;
    cr_assert_eq(mkb_auth_frame(K, seq, body, strlen(body), &f, len), MKB_OK);
    return f;
}

Test(auth, key_is_random) {
    uint8_t a[MKB_AUTH_KEY_BYTES], b[MKB_AUTH_KEY_BYTES];
    cr_assert_eq(mkb_auth_key_new(a), MKB_OK);
    cr_assert_eq(mkb_auth_key_new(b), MKB_OK);
    cr_assert(memcmp(a, b, sizeof a) != 0);
    char hex[2 * MKB_AUTH_KEY_BYTES + 1];
    uint8_t back[MKB_AUTH_KEY_BYTES];
    mkb_auth_hex(a, sizeof a, hex);
    cr_assert(mkb_auth_unhex(hex, back, sizeof back));
    cr_assert(memcmp(a, back, sizeof a) == 0);
    cr_assert(!mkb_auth_unhex("zz", back, 1));
    cr_assert(!mkb_auth_unhex("abc", back, 2));
}

Test(auth, frames_in_order_split_anywhere) {
    size_t l0, l1;
    char *f0 = frame(0, "{\"kind\":\"stage\"}", &l0), *f1 = frame(1, "{\"kind\":\"result\",\"x\":1}", &l1);
    char *all = malloc(l0 + l1);
    memcpy(all, f0, l0);
    memcpy(all + l0, f1, l1);
    for (size_t cut = 0; cut <= l0 + l1; cut++) {
        struct mkb_auth_reader r;
        mkb_auth_reader_init(&r, K);
        mkb_auth_reader_feed(&r, all, cut);
        mkb_auth_reader_feed(&r, all + cut, l0 + l1 - cut);
        char *b;
        size_t bl;
        cr_assert(mkb_auth_reader_next(&r, &b, &bl), "cut %zu", cut);
        cr_assert_str_eq(b, "{\"kind\":\"stage\"}");
        free(b);
        cr_assert(mkb_auth_reader_next(&r, &b, &bl));
        cr_assert_str_eq(b, "{\"kind\":\"result\",\"x\":1}");
        free(b);
        cr_assert(!mkb_auth_reader_next(&r, &b, &bl));
        const char *why;
        cr_assert(!mkb_auth_reader_leftover(&r, &why));
        mkb_auth_reader_release(&r);
    }
    free(all);
    free(f0);
    free(f1);
}

static bool accepts(const char *bytes, size_t n, const char **why_out) {
    struct mkb_auth_reader r;
    mkb_auth_reader_init(&r, K);
    mkb_auth_reader_feed(&r, bytes, n);
    char *b;
    size_t bl;
    bool ok = mkb_auth_reader_next(&r, &b, &bl);
    if (ok) free(b);
    static char why[256];
    const char *w;
    why[0] = '\0';
    if (mkb_auth_reader_leftover(&r, &w)) snprintf(why, sizeof why, "%s", w);
    *why_out = why;
    mkb_auth_reader_release(&r);
    return ok;
}

Test(auth, forged_frames_are_refused) {
    const char *why;
    /* a result line printed by the candidate: no key, no valid tag */
    const char *fake = "MKB1 0 15 0000000000000000000000000000000000000000000000000000000000000000\n"
                       "{\"passed\":true}\n";
    cr_assert(!accepts(fake, strlen(fake), &why));
    cr_assert(strstr(why, "tag"), "%s", why);
    /* a frame made with another key */
    uint8_t other[MKB_AUTH_KEY_BYTES] = {9};
    char *f;
    size_t l;
    mkb_auth_frame(other, 0, "{}", 2, &f, &l);
    cr_assert(!accepts(f, l, &why));
    free(f);
    /* a body changed after signing */
    f = frame(0, "{\"correct\":false}", &l);
    char *p = strstr(f, "false");
    memcpy(p, "true ", 5);
    cr_assert(!accepts(f, l, &why));
    free(f);
    /* garbage in front of a good frame ends the trusted stream */
    f = frame(0, "{}", &l);
    char *g = malloc(l + 6);
    memcpy(g, "junk\n", 5);
    memcpy(g + 5, f, l);
    cr_assert(!accepts(g, l + 5, &why));
    cr_assert(strstr(why, "malformed"), "%s", why);
    free(g);
    free(f);
}

Test(auth, replay_and_reorder_are_refused) {
    size_t l0, l1;
    char *f0 = frame(0, "{\"a\":0}", &l0), *f1 = frame(1, "{\"a\":1}", &l1);
    const char *why;
    cr_assert(!accepts(f1, l1, &why), "frame 1 before frame 0");
    cr_assert(strstr(why, "sequence"), "%s", why);
    struct mkb_auth_reader r;
    mkb_auth_reader_init(&r, K);
    mkb_auth_reader_feed(&r, f0, l0);
    mkb_auth_reader_feed(&r, f0, l0); /* replayed */
    char *b;
    size_t bl;
    cr_assert(mkb_auth_reader_next(&r, &b, &bl));
    free(b);
    cr_assert(!mkb_auth_reader_next(&r, &b, &bl));
    cr_assert(mkb_auth_reader_leftover(&r, &why));
    /* and nothing after the bad frame is accepted, even a good one */
    mkb_auth_reader_feed(&r, f1, l1);
    cr_assert(!mkb_auth_reader_next(&r, &b, &bl));
    cr_assert(r.rejected_bytes > 0);
    mkb_auth_reader_release(&r);
    free(f0);
    free(f1);
}

Test(auth, truncated_tail_is_reported) {
    size_t l;
    char *f = frame(0, "{\"kind\":\"result\"}", &l);
    const char *why;
    cr_assert(!accepts(f, l - 3, &why));
    cr_assert(strstr(why, "ended inside"), "%s", why);
    free(f);
}
