/* Architecture strings: what parses, to what, and what is refused. */
#include <float.h>
#include <math.h>

#include "kernels/arch.h"
#include "kernels/numerical.h"
#include "testutil.h"

static struct ntk_arch parse_ok(const char *s) {
  struct ntk_arch a;
  ntk_status st = ntk_arch_parse(s, 1.0, 0.0, &a);
  ck_assert_msg(st == NTK_OK, "'%s' should parse: %s", s, ntk_error_message());
  return a;
}

static void parse_bad(const char *s, const char *needle) {
  struct ntk_arch a;
  ntk_status st = ntk_arch_parse(s, 1.0, 0.0, &a);
  ck_assert_msg(st == NTK_ECONFIG, "'%s' should be refused", s);
  ck_assert_msg(strstr(ntk_error_message(), needle), "'%s': message '%s' lacks '%s'", s, ntk_error_message(),
                needle);
  ck_assert_ptr_null(a.layers);
}

/* parse_bad, and the message points at `column` (1-based). */
static void parse_bad_at(const char *s, size_t column, const char *needle) {
  parse_bad(s, needle);
  char col[32];
  snprintf(col, sizeof col, "column %zu: ", column);
  ck_assert_msg(strstr(ntk_error_message(), col), "'%s': message '%s' is not at %s", s, ntk_error_message(), col);
}

START_TEST(test_fc_layers) {
  struct ntk_arch a = parse_ok("Dense Relu Dense(W_std=2, b_std=0.1) LeakyRelu(0.2) Dense Abs Dense Erf Identity Dense");
  ck_assert_uint_eq(a.n, 10);
  ck_assert_int_eq(a.layers[0].kind, NTK_LAYER_DENSE);
  ck_assert_double_eq(a.layers[0].w_std, 1.0);
  ck_assert_int_eq(a.layers[1].map.kind, NTK_MAP_ABRELU);
  ck_assert_double_eq(a.layers[1].map.a, 0.0);
  ck_assert_double_eq(a.layers[1].map.b, 1.0);
  ck_assert_double_eq(a.layers[2].w_std, 2.0);
  ck_assert_double_eq(a.layers[2].b_std, 0.1);
  ck_assert_double_eq(a.layers[3].map.a, 0.2);
  ck_assert_double_eq(a.layers[5].map.a, -1.0);
  ck_assert_int_eq(a.layers[7].map.kind, NTK_MAP_ERF);
  ck_assert_int_eq(a.layers[8].kind, NTK_LAYER_IDENTITY);
  ck_assert(ntk_arch_is_fc(&a));
  ntk_arch_free(&a);
}
END_TEST

START_TEST(test_global_defaults) {
  struct ntk_arch a;
  ck_assert_int_eq(ntk_arch_parse("Dense Relu Dense(b_std=0.5)", 1.5, 0.2, &a), NTK_OK);
  ck_assert_double_eq(a.layers[0].w_std, 1.5);
  ck_assert_double_eq(a.layers[0].b_std, 0.2);
  ck_assert_double_eq(a.layers[2].w_std, 1.5);
  ck_assert_double_eq(a.layers[2].b_std, 0.5);
  ntk_arch_free(&a);
}
END_TEST

START_TEST(test_cnn_layers_and_repeat) {
  struct ntk_arch a = parse_ok("[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense");
  ck_assert_uint_eq(a.n, 42);
  ck_assert_int_eq(a.layers[0].kind, NTK_LAYER_CONV);
  ck_assert_int_eq(a.layers[0].filter, 3);
  ck_assert_int_eq(a.layers[0].padding, NTK_PAD_SAME);
  ck_assert_int_eq(a.layers[39].map.kind, NTK_MAP_ABRELU);
  ck_assert_int_eq(a.layers[40].kind, NTK_LAYER_GLOBALAVGPOOL);
  ck_assert(!ntk_arch_is_fc(&a));
  ntk_arch_free(&a);
  a = parse_ok("Conv(5, 2, CIRCULAR) Relu AvgPool(2) Conv(3, padding=VALID, W_std=1.4) Erf Flatten Dense");
  ck_assert_int_eq(a.layers[0].stride, 2);
  ck_assert_int_eq(a.layers[0].padding, NTK_PAD_CIRCULAR);
  ck_assert_int_eq(a.layers[2].window, 2);
  ck_assert_int_eq(a.layers[2].stride, 2);
  ck_assert_int_eq(a.layers[3].padding, NTK_PAD_VALID);
  ck_assert_double_eq(a.layers[3].w_std, 1.4);
  ntk_arch_free(&a);
  a = parse_ok("[[Dense Relu]*2 Dense Erf]*3 Dense");
  ck_assert_uint_eq(a.n, 19);
  ntk_arch_free(&a);
  a = parse_ok("  Dense   [Relu Dense]*0  ");
  ck_assert_uint_eq(a.n, 1);
  ntk_arch_free(&a);
}
END_TEST

START_TEST(test_canonical) {
  struct ntk_arch a = parse_ok("[Dense Relu]*2 Dense(W_std=1)"), b = parse_ok("Dense Relu Dense(b_std=0) Relu Dense");
  char ca[512], cb[512];
  ntk_arch_canonical(&a, ca, sizeof ca);
  ntk_arch_canonical(&b, cb, sizeof cb);
  ck_assert_str_eq(ca, cb);
  struct ntk_arch c = parse_ok("Dense Relu Dense Relu Dense(W_std=2)");
  ntk_arch_canonical(&c, cb, sizeof cb);
  ck_assert_str_ne(ca, cb);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  ntk_arch_free(&c);
}
END_TEST

/* A Polynomial of 32 long coefficients (about 740 bytes of text): its text
 * was written into a 512-byte buffer past its end (a crash), and the job
 * identity read each layer through 512 bytes, so two such networks that
 * differ past the cut shared a store. Whole now, and told apart. */
START_TEST(test_canonical_of_a_long_polynomial) {
  char text[2][1200], canon[2][NTK_LAYER_TEXT_MAX + 64];
  for (int v = 0; v < 2; v++) {
    int n = snprintf(text[v], sizeof text[v], "Dense Polynomial([");
    for (int k = 0; k < 32; k++)
      n += snprintf(text[v] + n, sizeof text[v] - (size_t)n, "%s%s", k ? ", " : "",
                    k == 31 && v ? "-1.25e-300" : "0.12345678901234568");
    snprintf(text[v] + n, sizeof text[v] - (size_t)n, "]) Dense");
    struct ntk_arch a = parse_ok(text[v]);
    size_t need = ntk_arch_canonical(&a, canon[v], sizeof canon[v]);
    ck_assert_uint_lt(need, sizeof canon[v]);
    ck_assert_uint_gt(need, 600);
    ck_assert_msg(strstr(canon[v], v ? ", -1.25e-300]) Dense" : "0.12345678901234568]) Dense"), "%s",
                  canon[v]);
    ntk_arch_free(&a);
  }
  ck_assert_str_ne(canon[0], canon[1]);
}
END_TEST

START_TEST(test_bad_strings) {
  parse_bad("", "no layers");
  parse_bad("   ", "no layers");
  parse_bad("Relu Dense", "cannot be the first layer");
  parse_bad("Dense Relu Erf Dense", "must follow Dense or Conv");
  parse_bad("Dense Relu Identity Relu", "must follow Dense or Conv");
  parse_bad("Dence Relu", "unknown layer 'Dence'");
  parse_bad("Dense Relu(", "expected");
  parse_bad("Dense(W_std=-1)", "Dense: W_std must be a number >= 0, not -1");
  parse_bad("Dense(W_std=abc)", "Dense: W_std must be a number >= 0, not 'abc'");
  parse_bad("Dense(w=1)", "unknown argument w for Dense");
  parse_bad("Dense(3, 4, 0.1, 0, -1, 'ntk', (1, 1), 5)", "too many positional"); /* stax's 7, and one more */
  parse_bad("Conv", "needs arguments");
  parse_bad("Conv(0)", "Conv: filter must be an integer from 1 to 1000000, not 0");
  parse_bad("Conv(3, SAMEISH)", "unknown padding");
  parse_bad("Conv(3, 1, SAME, 4)", "too many positional");
  parse_bad("LeakyRelu", "LeakyRelu needs alpha");
  parse_bad("Dense LeakyRelu()", "LeakyRelu needs alpha");
  parse_bad("Dense Relu(True, 2)", "too many arguments for Relu"); /* stax's Relu(do_stabilize) */
  parse_bad("Dense Sign(2)", "takes no arguments");
  parse_bad("[Dense Relu", "missing ']'");
  parse_bad("Dense ] Relu", "unmatched ']'");
  parse_bad("[Dense Relu]*x", "repeat count must be an integer from 0 to 100000, not 'x'");
  parse_bad("[Dense Relu]*-2", "repeat count must be an integer from 0 to 100000, not -2");
  parse_bad("[]*3 Dense", "empty group");
  parse_bad("Dense GlobalAvgPool Conv(3)", "spatial layer after Flatten");
  parse_bad("Conv(3) Flatten Relu Dense", "must follow Dense or Conv");
  parse_bad("Dense, Relu", "unexpected character ','");
  parse_bad("[Dense Relu]*99999 Dense", "repeat count 99999 makes a group of 2 layers 199998 layers");
  parse_bad("[Dense Relu]*50000 Dense", "more than 100000 layers, the limit of an arch string (repeats expanded)");
  parse_bad("[[[[[[[[[[[[[[[[[Dense]]]]]]]]]]]]]]]]]", "nested too deeply");
}
END_TEST

/* The nonlinearities come from src/kernels/layers.c's table: stax's names,
 * parameters positional or by keyword, defaults, the derived constants. */
START_TEST(test_map_params) {
  struct ntk_arch a = parse_ok("Dense ABRelu(0.1, 2) Dense ABRelu(b=3, a=-1) Dense Erf(2) Dense Erf(c=0.5, b=3) "
                               "Dense Sigmoid_like Dense LeakyRelu(alpha=0.2) Dense Erf(1, 1, 0)");
  const struct ntk_layer *L = a.layers;
  ck_assert_int_eq(L[1].kind, NTK_LAYER_MAP);
  ck_assert(L[1].map.kind == NTK_MAP_ABRELU && L[1].map.a == 0.1 && L[1].map.b == 2);
  ck_assert(L[3].map.kind == NTK_MAP_ABRELU && L[3].map.a == -1 && L[3].map.b == 3);
  ck_assert(L[5].map.kind == NTK_MAP_ERF && L[5].map.a == 2 && L[5].map.b == 1 && L[5].map.c == 0);
  ck_assert(L[7].map.a == 1 && L[7].map.b == 3 && L[7].map.c == 0.5);
  ck_assert(L[9].map.kind == NTK_MAP_ERF && L[9].map.a == 0.5 && L[9].map.b == 1 / 2.4020563531719796 &&
            L[9].map.c == 0.5);
  ck_assert(L[11].map.kind == NTK_MAP_ABRELU && L[11].map.a == 0.2 && L[11].map.b == 1);
  ck_assert(ntk_map_is_plain_erf(&L[13].map) && !ntk_map_is_plain_erf(&L[5].map));
  char buf[1024];
  ntk_arch_canonical(&a, buf, sizeof buf);
  /* defaults spelled out only where one differs; the old spellings unchanged (job hashes) */
  ck_assert_msg(strstr(buf, "ABRelu(0.1, 2) ") && strstr(buf, "ABRelu(-1, 3) ") && strstr(buf, "Erf(2, 1, 0) ") &&
                    strstr(buf, "Erf(1, 3, 0.5) ") && strstr(buf, "Sigmoid_like ") && strstr(buf, "LeakyRelu(0.2) "),
                "%s", buf);
  size_t len = strlen(buf);
  ck_assert_msg(len > 3 && !strcmp(buf + len - 3, "Erf"), "%s", buf);
  ntk_arch_free(&a);
  a = parse_ok("Dense Relu Dense Abs Dense Erf Dense LeakyRelu(0.1) Dense");
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "Dense(W_std=1, b_std=0) Relu Dense(W_std=1, b_std=0) Abs Dense(W_std=1, b_std=0) Erf "
                        "Dense(W_std=1, b_std=0) LeakyRelu(0.1) Dense(W_std=1, b_std=0)");
  ntk_arch_free(&a);
  /* quoted strings are the words they quote */
  a = parse_ok("Conv(3, 1, 'SAME') Relu Conv(3, padding=\"VALID\") GlobalAvgPool");
  ck_assert_int_eq(a.layers[0].padding, NTK_PAD_SAME);
  ck_assert_int_eq(a.layers[2].padding, NTK_PAD_VALID);
  ntk_arch_free(&a);
  /* two numbers and a quoted padding keyword: stax's Conv(out_chan, int
   * filter) or ntkd's Conv(filter, stride)? Refused, not guessed (it ran
   * as a 64 x 64 filter with stride 3); each syntax alone is read */
  parse_bad_at("Conv(64, 3, padding='SAME') Relu Flatten Dense", 21, "mixes ntkd's short form");
  parse_bad("Dense Conv(3, 2, padding=\"VALID\") Relu", "Conv(out_chan, (f, f), padding='SAME')");
  parse_bad("Conv(64, 3, padding=Padding.SAME) Relu", "mixes ntkd's short form");
  parse_bad("Conv(64, 3, padding=stax.Padding.SAME) Relu", "mixes ntkd's short form");
  parse_bad("Conv(64, 3, parameterization='ntk') Relu", "mixes ntkd's short form");
  a = parse_ok("Conv(64, (3, 3), padding='SAME') Relu Conv(3, 2, padding=SAME) Relu Conv(3, padding='SAME') Relu "
               "stax.Conv(8, 3, padding='SAME') Conv(3, 1, 'SAME') Flatten Dense");
  ck_assert_int_eq(a.layers[0].filter, 3);
  ck_assert_int_eq(a.layers[2].stride, 2);
  ck_assert_int_eq(a.layers[4].filter, 3);
  ck_assert_int_eq(a.layers[6].filter, 3);
  ck_assert_int_eq(a.layers[6].width, 8);
  ntk_arch_free(&a);
  /* Gelu's approximate changes only stax's finite-width function: the same network, the same text */
  a = parse_ok("Dense Gelu(approximate=True) Dense Gelu(False) Dense Gelu");
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "Dense(W_std=1, b_std=0) Gelu Dense(W_std=1, b_std=0) Gelu Dense(W_std=1, b_std=0) Gelu");
  ck_assert(a.layers[1].map.kind == NTK_MAP_GELU);
  ntk_arch_free(&a);
  parse_bad("Dense Gelu(yes)", "'yes' is not True or False");
  a = parse_ok("Dense Polynomial([1, -0.5, 0.25]) Dense Polynomial(coef=(2,)) Dense Cos(c=0.5) Dense "
               "ExpNormalized(do_clip=True) Dense Monomial(5) Dense Hermite(0) Dense Sign Dense Rbf");
  ck_assert(a.layers[1].map.kind == NTK_MAP_POLYNOMIAL && a.layers[1].map.degree == 3 &&
            a.layers[1].map.coef[2] == 0.25);
  ck_assert(a.layers[3].map.degree == 1 && a.layers[3].map.coef[0] == 2);
  ck_assert(a.layers[5].map.kind == NTK_MAP_SIN && a.layers[5].map.c == 0.5 + NTK_PI_2);
  ck_assert(a.layers[7].map.kind == NTK_MAP_EXPNORM && a.layers[7].map.flag && a.layers[7].map.a == 1 &&
            a.layers[7].map.b == -1);
  ck_assert(a.layers[9].map.degree == 5 && a.layers[11].map.degree == 0);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "Polynomial([1, -0.5, 0.25]) ") && strstr(buf, "Polynomial([2]) ") &&
                    strstr(buf, "Cos(1, 1, 0.5) ") && strstr(buf, "ExpNormalized(1, -1, True) ") &&
                    strstr(buf, "Monomial(5) ") && strstr(buf, "Hermite(0) ") && strstr(buf, " Sign ") &&
                    !strcmp(buf + strlen(buf) - 4, " Rbf"),
                "%s", buf);
  ntk_arch_free(&a);
  a = parse_ok("Dense LayerNorm Relu Dense LayerNorm(eps=0.5) Dense LayerNorm(-1, 0.25) Dense LayerNorm(axis=(-1,))");
  ck_assert(a.layers[1].kind == NTK_LAYER_LAYERNORM && a.layers[1].map.kind == NTK_MAP_LAYERNORM &&
            a.layers[1].map.a == 1e-12);
  ck_assert(a.layers[4].map.a == 0.5 && a.layers[6].map.a == 0.25);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, " LayerNorm Relu ") && strstr(buf, " LayerNorm(eps=0.5) ") &&
                    strstr(buf, " LayerNorm(eps=0.25) ") && !strcmp(buf + strlen(buf) - 10, " LayerNorm"),
                "%s", buf);
  ntk_arch_free(&a);
  parse_bad("Dense Relu LayerNorm", "LayerNorm must follow Dense or Conv (its input must be Gaussian)");
  parse_bad("Dense LayerNorm(axis=0)", "LayerNorm over the batch axis 0"); /* other axes: test_layernorm_axes */
  parse_bad("Dense LayerNorm(eps=-1)", "LayerNorm: eps must be a number >= 0, not -1");
  parse_bad("Dense LayerNorm(batch_axis=1)", "LayerNorm: batch_axis=1: ntkd's samples are on axis 0");
  a = parse_ok("Conv(3) SumPool(2) SumPool((2, 2)) AvgPool(2) GlobalSumPool");
  ck_assert(a.layers[1].kind == NTK_LAYER_AVGPOOL && a.layers[1].sum && a.layers[1].stride == 2);
  ck_assert(a.layers[2].sum && a.layers[2].stride == 1 && !a.layers[3].sum);
  ck_assert(a.layers[4].kind == NTK_LAYER_GLOBALAVGPOOL && a.layers[4].sum);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, " SumPool(2, 2) SumPool(2, 1) AvgPool(2, 2) GlobalSumPool"), "%s", buf);
  ntk_arch_free(&a);
  a = parse_ok("Conv(3) AvgPool((3, 3), (2, 2), 'SAME', normalize_edges=True) AvgPool(2, padding=SAME) "
               "SumPool((2, 2), padding='SAME') AvgPool(2, 2, normalize_edges=True) Flatten");
  ck_assert(a.layers[1].padding == NTK_PAD_SAME && a.layers[1].normalize_edges && a.layers[1].stride == 2);
  ck_assert(a.layers[2].padding == NTK_PAD_SAME && !a.layers[2].normalize_edges && a.layers[2].stride == 2);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, " AvgPool(3, 2, SAME, normalize_edges=True) AvgPool(2, 2, SAME) SumPool(2, 1, SAME) "
                            "AvgPool(2, 2) Flatten"),
                "%s", buf);
  ntk_arch_free(&a);
  /* the canonical text of SAME pooling (ntkd's short form, padding third) reads back */
  char nb[1024];
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, nb, sizeof nb);
  ck_assert_str_eq(buf, nb);
  ntk_arch_free(&b);
  /* CIRCULAR pooling (stax pools the periodically padded input VALID):
   * normalize_edges has no effect there and is dropped, so both spellings
   * are one network; the canonical text reads back */
  a = parse_ok("Conv(3) SumPool((2, 2), padding=CIRCULAR) AvgPool((3, 3), (2, 2), 'CIRCULAR', normalize_edges=True) "
               "AvgPool(2, 1, CIRCULAR) AvgPool((3, 1), padding=CIRCULAR) GlobalAvgPool");
  ck_assert(a.layers[1].padding == NTK_PAD_CIRCULAR && a.layers[1].sum && a.layers[2].padding == NTK_PAD_CIRCULAR &&
            !a.layers[2].normalize_edges && a.layers[3].stride == 1 && a.layers[4].window_w == 1);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, " SumPool(2, 1, CIRCULAR) AvgPool(3, 2, CIRCULAR) AvgPool(2, 1, CIRCULAR) "
                            "AvgPool((3, 1), (1, 1), CIRCULAR) GlobalAvgPool"),
                "%s", buf);
  b = parse_ok(buf);
  ntk_arch_canonical(&b, nb, sizeof nb);
  ck_assert_str_eq(buf, nb);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  struct ntk_arch c = parse_ok("Conv(3) AvgPool((3, 3), (2, 2), 'CIRCULAR')");
  ntk_arch_canonical(&c, nb, sizeof nb);
  ck_assert_msg(strstr(nb, " AvgPool(3, 2, CIRCULAR)"), "%s", nb);
  ntk_arch_free(&c);
  parse_bad("Conv(3) SumPool(2, normalize_edges=True)", "unknown argument normalize_edges for SumPool");
  parse_bad("Conv(3) AvgPool(2, normalize_edges=yes)", "'yes' is not True or False");
  parse_bad("Dense Monomial(6)", "Monomial: degree must be an integer from 0 to 5, not 6");
  parse_bad("Dense Polynomial(3)", "coef wants a list of numbers");
  parse_bad("Dense Polynomial([1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,"
            "33])",
            "more than 32 values in a list");
  parse_bad("Dense Hermite(-1)", "Hermite: degree must be an integer from 0 to 1000, not -1");
  parse_bad("Dense Hermite(1.5)", "Hermite: degree must be an integer from 0 to 1000, not 1.5");
  parse_bad("Dense ABRelu(0.1)", "ABRelu needs b");
  parse_bad("Dense ABRelu(1, 2, False, 3)", "too many arguments for ABRelu");
  parse_bad("Dense Erf(a=1, a=2)", "a given twice");
  parse_bad("Dense Erf(1, a=2)", "a given twice");
  parse_bad("Dense Erf(d=1)", "unknown argument d for Erf");
  parse_bad("Dense Erf(x)", "Erf: a must be a number, not 'x'");
  parse_bad("Dense Erf(inf)", "Erf: a must be a number, not 'inf'");
  parse_bad("Dense Erf([1, 2])", "Erf: a must be a number, not a list");
  parse_bad("Dense Sigmoid_like(1)", "Sigmoid_like takes no arguments");
  parse_bad("Dense Erf([1, x])", "expected a number in the list");
  parse_bad("Conv(3, 1, 'SAME)", "unterminated quoted value");
  parse_bad("Dense Gelu2", "unknown layer 'Gelu2' (Dense, Conv");
}
END_TEST

/* stax's own spellings: tuples, strides=, quoted padding, widths, b_std=None. */
START_TEST(test_stax_syntax) {
  struct ntk_arch a = parse_ok("Conv(32, (3, 3), padding='SAME') Relu Conv(64, (3, 3), (2, 2), 'VALID', W_std=1.5, "
                               "b_std=None) Relu AvgPool((2, 2)) AvgPool((2, 2), strides=(2, 2)) "
                               "Conv(16, filter_shape=(5, 5), strides=2) Erf AvgPool(3, strides=1) Flatten "
                               "Dense(512, W_std=1.5, b_std=0.05) Gelu Dense(10)");
  const struct ntk_layer *L = a.layers;
  ck_assert(L[0].kind == NTK_LAYER_CONV && L[0].filter == 3 && L[0].stride == 1 && L[0].padding == NTK_PAD_SAME &&
            L[0].width == 32);
  ck_assert(L[2].filter == 3 && L[2].stride == 2 && L[2].padding == NTK_PAD_VALID && L[2].w_std == 1.5 &&
            L[2].b_std == 0 && L[2].width == 64);
  ck_assert_msg(L[4].window == 2 && L[4].stride == 1, "stax's AvgPool((2, 2)) has stride 1: %d", L[4].stride);
  ck_assert(L[5].window == 2 && L[5].stride == 2);
  ck_assert(L[6].filter == 5 && L[6].stride == 2 && L[6].padding == NTK_PAD_VALID && L[6].width == 16);
  ck_assert_msg(L[8].window == 3 && L[8].stride == 1, "%d %d", L[8].window, L[8].stride);
  ck_assert(L[10].width == 512 && L[10].w_std == 1.5 && L[10].b_std == 0.05 && L[12].width == 10);
  /* the same network in ntkd's short forms has the same canonical text */
  struct ntk_arch b = parse_ok("Conv(3, 1, SAME) Relu Conv(3, 2, VALID, W_std=1.5, b_std=0) Relu AvgPool(2, 1) "
                               "AvgPool(2) Conv(5, stride=2) Erf AvgPool(3, 1) Flatten Dense(W_std=1.5, b_std=0.05) "
                               "Gelu Dense");
  char ca[2048], cb[2048];
  ntk_arch_canonical(&a, ca, sizeof ca);
  ntk_arch_canonical(&b, cb, sizeof cb);
  ck_assert_str_eq(ca, cb);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  /* ntkd's short AvgPool(2) keeps stride 2 */
  a = parse_ok("Conv(3) AvgPool(2) Flatten");
  ck_assert_int_eq(a.layers[1].stride, 2);
  ntk_arch_free(&a);
  a = parse_ok("Conv(32, (3, 5), strides=(2, 1)) Relu AvgPool((2, 3)) Conv(4, (1, 3), padding=SAME) GlobalAvgPool");
  ck_assert(a.layers[0].filter == 3 && a.layers[0].filter_w == 5 && a.layers[0].stride == 2 &&
            a.layers[0].stride_w == 1);
  ck_assert(a.layers[2].window == 2 && a.layers[2].window_w == 3 && a.layers[2].stride == 1 &&
            a.layers[2].stride_w == 1);
  ck_assert(a.layers[3].filter == 1 && a.layers[3].filter_w == 3);
  ntk_arch_canonical(&a, ca, sizeof ca);
  ck_assert_msg(strstr(ca, "Conv(1, (3, 5), (2, 1), VALID, W_std=1, b_std=0) Relu AvgPool((2, 3), (1, 1), VALID) "
                           "Conv(1, (1, 3), (1, 1), SAME, "),
                "%s", ca);
  b = parse_ok(ca); /* reads back */
  ntk_arch_canonical(&b, cb, sizeof cb);
  ck_assert_str_eq(ca, cb);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  a = parse_ok("Conv(8, (3,), strides=2, padding='SAME') Relu AvgPool((2,)) Flatten");
  ck_assert(a.layers[0].one_d && a.layers[0].filter == 3 && a.layers[0].filter_w == 1 && a.layers[0].stride == 2 &&
            a.layers[0].stride_w == 1);
  ck_assert(a.layers[2].one_d && a.layers[2].window == 2 && a.layers[2].window_w == 1 && a.layers[2].stride == 1);
  ntk_arch_canonical(&a, ca, sizeof ca);
  ck_assert_msg(strstr(ca, "Conv(1, (3,), (2,), SAME, ") && strstr(ca, "AvgPool((2,), (1,), VALID)"), "%s", ca);
  ntk_arch_free(&a);
  parse_bad("Conv(32, (3, 0))", "Conv: filter must be an integer from 1 to 1000000, not 0");
  parse_bad("Conv(32, (3, 3, 3))", "filter: expected n, (h, w)");
  parse_bad("Conv(32, (3,), (2, 3))", "Conv mixes 1-D sizes (n,) with 2-D ones");
  parse_bad("AvgPool((2, 2), padding='CIRCULAR', normalize_edges=maybe)", "'maybe' is not True or False");
  parse_bad("Conv(32, (3, 3), 1, SAME, 1, 0, None, 'ntk', (1, 1), 5)", "too many positional arguments for Conv");
  parse_bad("Dense(512, b_std=Nonsense)", "Dense: b_std must be a number >= 0 or None, not 'Nonsense'");
}
END_TEST

/* parameterization = standard: widths needed (but the last), kept in the
 * canonical text with the bias rule; the same layers under 'ntk' differ. */
START_TEST(test_standard) {
  struct ntk_arch a, b;
  ck_assert_int_eq(ntk_arch_parse_param("Dense(64, b_std=0) Relu Dense(32, b_std=None) Relu Dense", 1, 0, 1, &a),
                   NTK_OK);
  ck_assert(a.standard && a.layers[0].bias && !a.layers[2].bias && !a.layers[4].bias);
  char buf[1024], nb[1024];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "parameterization=standard: Dense(64, W_std=1, b_std=0) Relu Dense(32, W_std=1, b_std=None) "
                        "Relu Dense(0, W_std=1, b_std=None)");
  ck_assert_int_eq(ntk_arch_parse_param("Dense(64, b_std=0) Relu Dense(32, b_std=None) Relu Dense", 1, 0, 0, &b),
                   NTK_OK);
  ntk_arch_canonical(&b, nb, sizeof nb);
  ck_assert_str_eq(nb, "Dense(W_std=1, b_std=0) Relu Dense(W_std=1, b_std=0) Relu Dense(W_std=1, b_std=0)");
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  /* a b_std > 0 from the job's defaults is a bias too */
  ck_assert_int_eq(ntk_arch_parse_param("Conv(8, (3, 3)) Relu GlobalAvgPool Dense", 1, 0.1, 1, &a), NTK_OK);
  ck_assert(a.layers[0].bias && a.layers[3].bias);
  ntk_arch_free(&a);
  ck_assert_int_eq(ntk_arch_parse_param("Dense Relu Dense(10)", 1, 0, 1, &a), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "layer 1 (Dense): under parameterization = standard every Dense and Conv "
                                            "but the last gives its width, as in stax: Dense(512, ...)"),
                "%s", ntk_error_message());
  ck_assert_int_eq(ntk_arch_parse_param("Conv(3) Relu Flatten Dense(10)", 1, 0, 1, &a), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "Conv(64, (3, 3), ...)"), "%s", ntk_error_message());
}
END_TEST

/* stax's combinators: FanOut(n) parallel(...) FanInSum/FanInConcat, serial
 * with commas, nesting; flattened to FORK ... NEXT ... JOIN. */
START_TEST(test_residual) {
  struct ntk_arch a = parse_ok("Conv(3) FanOut(2) parallel(serial(Relu, Conv(3, 1, SAME), Relu Conv(3, 1, SAME)), "
                               "Identity) FanInSum serial(FanOut(3), parallel(Identity, Conv(1), serial(FanOut(2) "
                               "parallel(Conv(1), Identity) FanInSum)), FanInConcat) GlobalAvgPool");
  ntk_layer_kind want[] = {NTK_LAYER_CONV, NTK_LAYER_FORK,     NTK_LAYER_MAP,  NTK_LAYER_CONV,     NTK_LAYER_MAP,
                           NTK_LAYER_CONV, NTK_LAYER_NEXT,     NTK_LAYER_IDENTITY, NTK_LAYER_JOIN, NTK_LAYER_FORK,
                           NTK_LAYER_IDENTITY, NTK_LAYER_NEXT, NTK_LAYER_CONV, NTK_LAYER_NEXT,     NTK_LAYER_FORK,
                           NTK_LAYER_CONV, NTK_LAYER_NEXT,     NTK_LAYER_IDENTITY, NTK_LAYER_JOIN, NTK_LAYER_JOIN,
                           NTK_LAYER_GLOBALAVGPOOL};
  ck_assert_uint_eq(a.n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < a.n; i++) ck_assert_msg(a.layers[i].kind == want[i], "layer %zu: %d", i, a.layers[i].kind);
  ck_assert(a.layers[1].branches == 2 && a.layers[8].sum && a.layers[9].branches == 3 && a.layers[18].sum &&
            !a.layers[19].sum);
  char buf[2048];
  ntk_arch_canonical(&a, buf, sizeof buf);
  struct ntk_arch b = parse_ok(buf); /* the canonical text reads back as the same network */
  char again[2048];
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  parse_bad("Conv(3) FanOut(2) parallel(Relu, Identity) FanInSum", "every branch must end Gaussian");
  parse_bad("Conv(3) Relu FanOut(2) parallel(serial(Relu Conv(3)), Identity) FanInSum",
            "a nonlinearity must follow Dense or Conv");
  parse_bad("Dense FanOut(2) parallel(serial(Dense Relu), Identity) FanInSum",
            "FanInSum): every branch must end Gaussian");
  /* a sum of one branch is that branch, Gaussian or not, as neural-tangents
   * takes it (it refused "every branch must end Gaussian"); its output is
   * Gaussian only if the branch's is */
  a = parse_ok("Dense Relu FanOut(1) parallel(Identity) FanInSum Dense");
  ntk_arch_free(&a);
  parse_bad("Dense Relu FanOut(1) parallel(Identity) FanInSum Relu", "a nonlinearity must follow Dense or Conv");
  a = parse_ok("Dense Relu FanOut(1) parallel(Dense) FanInSum Relu Dense");
  ntk_arch_free(&a);
  /* FanOut(n) straight into its FanIn, as stax takes it: n Identity branches */
  {
    struct ntk_arch d = parse_ok("Dense FanOut(3) FanInProd Dense");
    struct ntk_arch e = parse_ok("Dense FanOut(3) parallel(Identity, Identity, Identity) FanInProd Dense");
    char cd[512], ce[512];
    ntk_arch_canonical(&d, cd, sizeof cd);
    ntk_arch_canonical(&e, ce, sizeof ce);
    ck_assert_str_eq(cd, ce);
    ck_assert_int_eq((int)d.n, (int)e.n);
    ntk_arch_free(&d);
    ntk_arch_free(&e);
  }
  a = parse_ok("Conv(3) FanOut(2) FanInConcat(axis=1) Relu Flatten Dense");
  ntk_arch_free(&a);
  parse_bad("Dense Relu FanOut(2) FanInSum Dense", "FanInSum): every branch must end Gaussian");
  parse_bad("Dense FanOut(2) Dense", "followed by parallel(...) with n branches, or by a FanIn");
  parse_bad("Dense FanOut(2) parallel(Dense, Dense, Dense) FanInSum", "parallel(...) has 3 branches after FanOut(2)");
  parse_bad("Dense FanOut(2) parallel(Dense, , Dense) FanInSum", "an empty branch in parallel(...)");
  /* a trailing comma ends the branches, as in Python */
  parse_bad("Dense FanOut(2) parallel(Dense, ) FanInSum", "parallel(...) has 1 branches after FanOut(2)");
  parse_bad("Dense FanOut(2) Dense", "FanOut(n) must be followed by parallel(...)");
  parse_bad("Dense FanOut(2) parallel(Dense, Dense) Relu", "must end in FanInSum, FanInProd or FanInConcat");
  /* left open at the end: neural-tangents' network of several outputs */
  parse_bad("Dense FanOut(2) parallel(Dense, Dense)", "FanInConcat (a network of several outputs, one kernel per "
            "branch, is not computed: compute each branch's network alone)");
  parse_bad("Dense parallel(Dense, Dense) FanInSum", "come in stax's residual pattern");
  parse_bad("Dense FanInSum", "come in stax's residual pattern");
  parse_bad("Dense FanOut parallel(Dense) FanInSum", "FanOut needs its number of branches");
  /* FanInConcat along a spatial axis (resolved against the data in cnn.c, test_cnn.c) */
  parse_bad("Dense FanOut(2) parallel(Dense, Dense) FanInConcat(axis=0)", "along the batch axis 0");
  parse_bad("Dense FanOut(2) parallel(Dense, Dense) FanInConcat(axis=1.5)", "an integer from -4 to 3");
  parse_bad("Dense FanOut(2) parallel(Dense, Dense) FanInConcat(axis=4)", "an integer from -4 to 3");
  /* -2 is spatial on any data that have it; 1 and 2 are the channels of some data: resolved against
   * the data (ntk_arch_check_rank, test_cnn.c's test_concat_axis_data) */
  parse_bad("Dense FanOut(2) parallel(Relu, Dense) FanInConcat(axis=-2)", "every branch must end Gaussian");
  parse_bad("Conv(3, 1, SAME) Relu GlobalAvgPool Dense FanOut(2) parallel(Dense, Dense) FanInConcat(axis=1) Erf Dense",
            "layer 10 (Erf): a nonlinearity must follow Dense or Conv");
  parse_bad("Dense FanOut(2) parallel(Dense, Dense) FanInConcat Relu", "a nonlinearity must follow Dense or Conv");
  parse_bad("Conv(3) FanOut(2) parallel(serial(Conv(3) Flatten), Identity) FanInSum",
            "a branch of a residual block contains a readout");
  parse_bad("serial(Dense Relu", "missing ')'");
}
END_TEST

/* FanInProd: a JOIN whose block's markers (FORK, NEXT, JOIN) all say
 * prod, a nested block's not; its canonical text reads back; its output
 * is not Gaussian (stax: is_gaussian only for one branch), its branches
 * need not be; equal widths as FanInSum. */
START_TEST(test_fan_in_prod) {
  struct ntk_arch a = parse_ok("Dense FanOut(3) parallel(Relu, serial(FanOut(2), parallel(Dense, Identity), FanInSum), "
                               "Erf) stax.FanInProd() Dense");
  ntk_layer_kind want[] = {NTK_LAYER_DENSE, NTK_LAYER_FORK, NTK_LAYER_MAP,  NTK_LAYER_NEXT, NTK_LAYER_FORK,
                           NTK_LAYER_DENSE, NTK_LAYER_NEXT, NTK_LAYER_IDENTITY, NTK_LAYER_JOIN, NTK_LAYER_NEXT,
                           NTK_LAYER_MAP,   NTK_LAYER_JOIN, NTK_LAYER_DENSE};
  int prod[] = {0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0};
  ck_assert_uint_eq(a.n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < a.n; i++) {
    ck_assert_msg(a.layers[i].kind == want[i], "layer %zu: %d", i, a.layers[i].kind);
    ck_assert_msg(a.layers[i].prod == prod[i], "layer %zu: prod %d", i, a.layers[i].prod);
  }
  ck_assert(a.layers[8].sum && !a.layers[11].sum && a.layers[11].branches == 3);
  char buf[2048], again[2048];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, ") FanInProd Dense") && strstr(buf, ") FanInSum ,"), "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  for (size_t i = 0; i < a.n; i++) ck_assert_int_eq(b.layers[i].prod, a.layers[i].prod);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  /* one branch: the product is that branch, Gaussian if it is */
  a = parse_ok("Dense FanOut(1) parallel(Dense) FanInProd Relu Dense");
  ntk_arch_free(&a);
  parse_bad("Dense FanOut(2) parallel(Dense, Identity) FanInProd Relu Dense", "a nonlinearity must follow Dense or Conv");
  parse_bad("Dense FanOut(2) parallel(Dense, Identity) FanInProd LayerNorm Dense", "LayerNorm must follow Dense or Conv");
  parse_bad("Dense FanOut(2) parallel(serial(FanOut(2), parallel(Dense, Identity), FanInProd), Identity) FanInSum",
            "FanInSum): every branch must end Gaussian");
  parse_bad("Dense FanOut(2) parallel(Dense, Dense) FanInProd(2)", "FanInProd takes no arguments");
  parse_bad("Dense FanInProd", "come in stax's residual pattern");
  struct ntk_arch c;
  ck_assert_int_eq(ntk_arch_parse_param("Dense(8) FanOut(2) parallel(Dense(16), Identity) FanInProd Dense(1)", 1, 0, 1,
                                        &c),
                   NTK_OK);
  struct ntk_widths w;
  ntk_widths_init(&w, 4);
  int bad = 0;
  for (size_t i = 0; i < c.n && !bad; i++) bad = ntk_widths_step(&w, &c.layers[i], i, 0);
  ck_assert_int_eq(bad, -1);
  ck_assert_msg(strstr(ntk_error_message(), "FanInSum and FanInProd need equal shapes"), "%s", ntk_error_message());
  ntk_arch_free(&c);
}
END_TEST

/* Dropout(rate, mode='train'): the keep rate in (0, 1], positional or by
 * keyword; mode 'test' is an Identity (the same network, the same canonical
 * text); its output is not Gaussian and, as in stax, it needs a Dense or
 * Conv before it on its path; the canonical text reads back. */
/* ConvLocal: Conv's arguments in both syntaxes, its own canonical text (a
 * store of the Conv network is another job's), read back the same. */
START_TEST(test_conv_local) {
  struct ntk_arch a = parse_ok("ConvLocal(3, 2, SAME, b_std=0.1) Relu stax.ConvLocal(8, (2, 3), strides=(1, 2), "
                               "padding='CIRCULAR', W_std=1.5) Relu GlobalAvgPool Dense");
  ck_assert_int_eq(a.layers[0].kind, NTK_LAYER_CONV);
  ck_assert_int_eq(a.layers[0].local, 1);
  ck_assert_int_eq(a.layers[0].filter, 3);
  ck_assert_int_eq(a.layers[0].stride, 2);
  ck_assert_int_eq(a.layers[2].local, 1);
  ck_assert_int_eq(a.layers[2].filter_w, 3);
  ck_assert_int_eq(a.layers[2].stride_w, 2);
  ck_assert_int_eq(a.layers[2].padding, NTK_PAD_CIRCULAR);
  char buf[1024], again[1024], conv[1024];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(!strncmp(buf, "ConvLocal(3, 2, SAME, W_std=1, b_std=0.1) Relu ConvLocal(1, (2, 3), (1, 2), CIRCULAR",
                         61), "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  struct ntk_arch c = parse_ok("Conv(3, 2, SAME, b_std=0.1) Relu stax.ConvLocal(8, (2, 3), strides=(1, 2), "
                               "padding='CIRCULAR', W_std=1.5) Relu GlobalAvgPool Dense");
  ntk_arch_canonical(&c, conv, sizeof conv);
  ck_assert_str_ne(buf, conv);
  ck_assert_int_eq(c.layers[0].local, 0);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  ntk_arch_free(&c);
  parse_bad("ConvLocal Relu Flatten Dense", "ConvLocal needs arguments");
  a = parse_ok("stax.ConvTranspose(8, (3, 2), strides=(2, 1), padding='SAME', b_std=0.1) Relu Flatten Dense");
  ck_assert_int_eq(a.layers[0].kind, NTK_LAYER_CONV);
  ck_assert_int_eq(a.layers[0].transpose, 1);
  ck_assert_int_eq(a.layers[0].local, 0);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(!strncmp(buf, "ConvTranspose(1, (3, 2), (2, 1), SAME, W_std=1, b_std=0.1) Relu", 62), "%s", buf);
  b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  parse_bad("ConvLocal(8, (3, 3), foo=1) Relu Flatten Dense", "unknown argument foo for ConvLocal");
}
END_TEST

/* GlobalSelfAttention: stax's arguments, positional and by keyword, its
 * enums in each spelling, stax's defaults (not the job's W_std, b_std); a
 * canonical text that reads back the same and tells apart what changes the
 * kernel (not the widths under the NTK parameterisation); what neural-tangents has
 * no closed form for, and what ntkd does not take, refused naming it. */
START_TEST(test_attention) {
  struct ntk_arch a;
  ck_assert_int_eq(ntk_arch_parse("Conv(2) Relu GlobalSelfAttention(16, 8, 8, 4, True, 1.5, 1.1, 0.5, 2, 0.1, "
                                  "'RELU', PositionalEmbedding.SUM.name, 2, None, None, 0.7, True) "
                                  "stax.GlobalSelfAttention(4, 4, 4, 1, attention_mechanism=AttentionMechanism.ABS, "
                                  "linear_scaling=False) GlobalAvgPool Dense", 2.0, 0.5, &a), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "closed-form kernel only with attention_mechanism='IDENTITY'"), "%s",
                ntk_error_message());
  ck_assert_int_eq(ntk_arch_parse("Conv(2) Relu GlobalSelfAttention(16, 8, 8, 4, True, 1.5, 1.1, 0.5, 2, 0.1, "
                                  "'RELU', PositionalEmbedding.SUM.name, 2, None, None, 0.7, True) "
                                  "stax.GlobalSelfAttention(4, 4, 4, 1, attention_mechanism=IDENTITY, "
                                  "linear_scaling=False, pos_emb_type='CONCAT') GlobalAvgPool Dense", 2.0, 0.5, &a),
                   NTK_OK);
  const struct ntk_layer *l = &a.layers[2], *m = &a.layers[3];
  ck_assert_int_eq(l->kind, NTK_LAYER_ATTENTION);
  ck_assert_int_eq(l->width, 16);
  ck_assert_double_eq(l->attn.w_key, 1.5);
  ck_assert_double_eq(l->attn.w_value, 1.1);
  ck_assert_double_eq(l->attn.w_query, 0.5);
  ck_assert_double_eq(l->attn.w_out, 2);
  ck_assert_double_eq(l->b_std, 0.1);
  ck_assert_int_eq(l->attn.mech, NTK_ATTN_RELU);
  ck_assert_int_eq(l->attn.pos, NTK_POS_SUM);
  ck_assert_double_eq(l->attn.pos_std, 0.7);
  ck_assert_int_eq(l->attn.val_pos, 1);
  ck_assert_int_eq(l->attn.linear, 1);
  /* stax's defaults, not [model] W_std = 2, b_std = 0.5 */
  ck_assert_double_eq(m->attn.w_key, 1);
  ck_assert_double_eq(m->b_std, 0);
  ck_assert_int_eq(m->attn.linear, 0);
  ck_assert_int_eq(m->attn.mech, NTK_ATTN_IDENTITY);
  ck_assert_int_eq(m->attn.pos, NTK_POS_CONCAT);
  char buf[2048], again[2048], other[2048];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "GlobalSelfAttention(1, 1, 1, 1, linear_scaling=True, W_key_std=1.5, W_value_std=1.1, "
                            "W_query_std=0.5, W_out_std=2, b_std=0.1, attention_mechanism='RELU', pos_emb_type='SUM', "
                            "W_pos_emb_std=0.7, val_pos_emb=True) GlobalSelfAttention(1, 1, 1, 1, "
                            "linear_scaling=False, W_key_std=1, W_value_std=1, W_query_std=1, W_out_std=1, "
                            "b_std=None, attention_mechanism='IDENTITY', pos_emb_type='CONCAT', W_pos_emb_std=1, "
                            "val_pos_emb=False) GlobalAvgPool"), "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  ntk_arch_free(&b);
  /* each parameter the kernel takes changes the text; the widths do not */
  const char *base = "GlobalSelfAttention(8, 8, 8, 2) GlobalAvgPool";
  const char *variants[] = {"GlobalSelfAttention(8, 8, 8, 2, W_key_std=2) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, W_value_std=2) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, W_query_std=2) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, W_out_std=2) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, b_std=0.5) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, attention_mechanism='ABS') GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, pos_emb_type='SUM') GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, pos_emb_type='SUM', W_pos_emb_std=2) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, pos_emb_type='SUM', val_pos_emb=True) GlobalAvgPool",
                            "GlobalSelfAttention(8, 8, 8, 2, False, attention_mechanism='IDENTITY') GlobalAvgPool"};
  struct ntk_arch c = parse_ok(base);
  ntk_arch_canonical(&c, again, sizeof again);
  ntk_arch_free(&c);
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    c = parse_ok(variants[i]);
    ntk_arch_canonical(&c, other, sizeof other);
    ck_assert_msg(strcmp(again, other), "%s: the same text as %s", variants[i], base);
    ntk_arch_free(&c);
  }
  c = parse_ok("GlobalSelfAttention(64, 32, 16, 8, pos_emb_p_norm=1) GlobalAvgPool");
  ntk_arch_canonical(&c, other, sizeof other);
  ck_assert_str_eq(again, other);
  ntk_arch_free(&c);
  ntk_arch_free(&a);
  /* n_chan_out is the next layer's fan-in under the standard parameterisation */
  ck_assert_int_eq(ntk_arch_parse_param("Conv(4, (3, 3)) GlobalSelfAttention(6, 1, 1, 1) GlobalAvgPool Dense(1)", 1,
                                        0, 1, &a), NTK_OK);
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "GlobalSelfAttention(6, 1, 1, 1,"), "%s", buf);
  ntk_arch_free(&a);
  parse_bad("GlobalSelfAttention(8, 8, 8) GlobalAvgPool", "needs n_chan_out, n_chan_key, n_chan_val and n_heads");
  parse_bad("GlobalSelfAttention(8, 8, 8, 0) GlobalAvgPool", "n_heads must be an integer from 1");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, linear_scaling=False) GlobalAvgPool",
            "linear_scaling=False) has a closed-form kernel only with attention_mechanism='IDENTITY'");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, attention_mechanism='TANH') GlobalAvgPool",
            "attention_mechanism must be 'SOFTMAX', 'IDENTITY', 'ABS' or 'RELU', not TANH");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, pos_emb_type='ROPE') GlobalAvgPool",
            "pos_emb_type must be 'NONE', 'SUM' or 'CONCAT', not ROPE");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, pos_emb_type='SUM', pos_emb_decay_fn=f) GlobalAvgPool",
            "pos_emb_decay_fn must be None");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, pos_emb_type='CONCAT', n_chan_pos_emb=4) GlobalAvgPool",
            "n_chan_pos_emb must be None");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, val_pos_emb=1) GlobalAvgPool", "val_pos_emb must be True or False");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, W_key_std=-1) GlobalAvgPool", "W_key_std must be a number >= 0");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, channel_axis=1) GlobalAvgPool", "channel_axis=1");
  parse_bad("GlobalSelfAttention(8, 8, 8, 2, mask=None) GlobalAvgPool", "unknown argument mask");
  parse_bad("Conv(3) Flatten GlobalSelfAttention(8, 8, 8, 2) Dense", "GlobalSelfAttention");
  /* a layer that makes 0 of everything, no bias: the network's value (ntk_layer_vanishes), not an underflow */
  const char *zero[] = {"GlobalSelfAttention(8, 8, 8, 2, W_value_std=0)",
                        "GlobalSelfAttention(8, 8, 8, 2, W_out_std=0)",
                        "GlobalSelfAttention(8, 8, 8, 2, W_key_std=0, attention_mechanism='ABS')",
                        "GlobalSelfAttention(8, 8, 8, 2, False, W_query_std=0, attention_mechanism='IDENTITY')"};
  const char *not_zero[] = {"GlobalSelfAttention(8, 8, 8, 2, W_key_std=0)",
                            "GlobalSelfAttention(8, 8, 8, 2, W_value_std=0, b_std=0.1)"};
  for (int k = 0; k < 6; k++) {
    a = parse_ok(k < 4 ? zero[k] : not_zero[k - 4]);
    ck_assert_msg(ntk_layer_vanishes(&a.layers[0]) == (k < 4), "%s", k < 4 ? zero[k] : not_zero[k - 4]);
    ntk_arch_free(&a);
  }
  /* Dropout after it: its weights give an NTK (neural-tangents computes it) */
  a = parse_ok("GlobalSelfAttention(8, 8, 8, 2) Dropout(0.5) GlobalAvgPool");
  ntk_arch_free(&a);
  /* a float32 job of it is computed in float64 (its positions' outputs nearly collinear) */
  a = parse_ok("Conv(2) GlobalSelfAttention(8, 8, 8, 2) Relu GlobalAvgPool Dense");
  char why[512];
  ck_assert(ntk_arch_float32_widened(&a, why, sizeof why));
  ck_assert_msg(strstr(why, "layer 2, a GlobalSelfAttention"), "%s", why);
  ntk_arch_free(&a);
  /* and one whose float32 depth is above 64: a Gelu counts 4, an ABRelu with a < 0 (Abs) 2 (float32 Gelu
   * networks of 60 layers were 4e-5 off, a hunt) */
  const struct {
    const char *net;
    int widened;
  } deep[] = {{"[Dense Relu]*64 Dense", 0},        {"[Dense Relu]*65 Dense", 1},
              {"[Dense Gelu]*16 Dense", 0},        {"[Dense Gelu]*17 Dense", 1},
              {"[Dense Abs]*32 Dense", 0},         {"[Dense Abs]*33 Dense", 1},
              {"[Dense ABRelu(-0.5, 1)]*33 Dense", 1}, {"[Dense LeakyRelu(0.2)]*64 Dense", 0},
              {"[Dense Gelu]*8 [Dense Relu]*32 Dense", 0}, {"[Dense Gelu]*8 [Dense Relu]*33 Dense", 1},
              {"[Dense ABRelu(1, -1)]*33 Dense", 1},  {"[Dense ABRelu(-0.5, -1)]*64 Dense", 0},
              {"Dense [FanOut(2) parallel(Dense, Dense) FanInProd]*4 Dense", 0},
              {"Dense [FanOut(2) parallel(Dense, Dense) FanInProd]*5 Dense", 1}};
  for (size_t k = 0; k < sizeof deep / sizeof *deep; k++) {
    a = parse_ok(deep[k].net);
    why[0] = '\0';
    ck_assert_msg(ntk_arch_float32_widened(&a, why, sizeof why) == deep[k].widened, "%s: %s", deep[k].net, why);
    ntk_arch_free(&a);
  }
  a = parse_ok("[Dense Gelu]*17 Dense");
  ck_assert(ntk_arch_float32_widened(&a, why, sizeof why));
  ck_assert_msg(!strcmp(why, "a float32 depth of 68, more than 64 (17 nonlinear layers; a Gelu counts 4, an Abs or "
                        "ABRelu of slopes of opposite signs 2, a FanInProd 16)"), "%s", why);
  ntk_arch_free(&a);
}
END_TEST

/* ImageResize: stax's shape and method (its names and enum), antialias; the
 * canonical text reads back and tells the methods apart (every linear
 * spelling one text); refusals name what is wrong. */
/* Index: stax's Slice[...] (with or without idx=, a stax. prefix), its
 * canonical text read back; each axis resolved as Python's slices against
 * the data; refusals name what is wrong. */
/* Aggregate (graph networks): stax's arguments, the canonical text read
 * back, the axes resolved against the data, the refusals. */
START_TEST(test_aggregate) {
  struct ntk_arch a = parse_ok("Dense(8) Relu Aggregate Dense(8) stax.Aggregate(aggregate_axis=None, batch_axis=0, "
                               "channel_axis=-1, implementation='SPARSE') Aggregate(None, 0, -1, None, "
                               "stax.AggregateImplementation.DENSE) Aggregate(aggregate_axis=(1,)) "
                               "Aggregate(aggregate_axis=(-3, -2)) GlobalAvgPool Dense");
  ck_assert_int_eq(a.layers[2].kind, NTK_LAYER_AGGREGATE);
  ck_assert_int_eq(a.layers[2].agg_axes, 0);
  ck_assert_int_eq(a.layers[4].agg_axes, 0);
  char buf[2048], again[2048];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "Relu Aggregate Dense(W_std=1, b_std=0) Aggregate Aggregate "
                            "Aggregate(aggregate_axis=(1,)) Aggregate(aggregate_axis=(-3, -2)) GlobalAvgPool"),
                "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  /* every spatial axis, and only those: (1,) on (N, L, C); (1, 2) or (-3, -2) on images */
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[2], 4, 2), 0);
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[6], 3, 6), 0);
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[6], 4, 6), -1);
  ck_assert_msg(strstr(ntk_error_message(), "layer 7 (Aggregate): ntkd aggregates over every spatial axis"), "%s",
                ntk_error_message());
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[7], 4, 7), 0);
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[7], 3, 7), -1); /* -3 is the batch axis of (N, L, C) */
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  a = parse_ok("Aggregate(aggregate_axis=(0, 1, 2)) Aggregate(aggregate_axis=3) GlobalAvgPool");
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[0], 4, 0), -1);
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[1], 4, 1), -1);
  ck_assert_int_eq(ntk_aggregate_axes(&a.layers[1], 3, 1), -1);
  ck_assert_msg(strstr(ntk_error_message(), "aggregate_axis 3 is outside data of 3 axes"), "%s", ntk_error_message());
  ntk_arch_free(&a);
  parse_bad("Aggregate(batch_axis=1) GlobalAvgPool", "ntkd's samples are on axis 0");
  parse_bad("Aggregate(channel_axis=1) GlobalAvgPool", "ntkd's channels are the last axis");
  parse_bad("Aggregate(implementation='COO') GlobalAvgPool", "implementation must be 'DENSE' or 'SPARSE'");
  parse_bad("Aggregate(to_dense=decode) GlobalAvgPool", "to_dense is applied by Python");
  parse_bad("Aggregate(aggregate_axis=5) GlobalAvgPool", "aggregate_axis 5 is not an axis");
  parse_bad("Aggregate(aggregate_axis=('H',)) GlobalAvgPool", "aggregate_axis must be None, an integer or a tuple");
  parse_bad("Aggregate(pattern=1) GlobalAvgPool", "pattern");
}
END_TEST

START_TEST(test_index) {
  struct ntk_arch a = parse_ok("Conv(2) Index(Slice[:, 1:5, ::2]) Relu stax.Index(idx=stax.Slice[..., -3::-1, :], "
                               "batch_axis=0) Index( Slice[ : , 2 : ] ) GlobalAvgPool Dense");
  ck_assert_int_eq(a.layers[1].kind, NTK_LAYER_RESIZE);
  ck_assert_int_eq(a.layers[1].index, 1);
  ck_assert_int_eq(a.layers[1].nslice, 3);
  ck_assert_int_eq(a.layers[3].slice[0].ellipsis, 1);
  char buf[2048], again[2048];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "Index(Slice[:, 1:5, ::2]) Relu Index(Slice[..., -3::-1, :]) Index(Slice[:, 2:])"),
                "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  /* resolved against data: Python's slice.indices */
  size_t keep[16], m = 0;
  ck_assert_int_eq(ntk_index_axis(&a.layers[1], 4, 1, 1, 7, keep, &m), 0);
  ck_assert_uint_eq(m, 4);
  ck_assert_uint_eq(keep[0], 1);
  ck_assert_uint_eq(keep[3], 4);
  ck_assert_int_eq(ntk_index_axis(&a.layers[1], 4, 1, 2, 5, keep, &m), 0);
  ck_assert_uint_eq(m, 3);
  ck_assert_uint_eq(keep[2], 4);
  ck_assert_int_eq(ntk_index_axis(&a.layers[3], 4, 3, 2, 6, keep, &m), 0); /* W: -3::-1 on 6: 3, 2, 1, 0 */
  ck_assert_uint_eq(m, 4);
  ck_assert_uint_eq(keep[0], 3);
  ck_assert_uint_eq(keep[3], 0);
  ck_assert_int_eq(ntk_index_axis(&a.layers[1], 3, 1, 1, 6, keep, &m), -1); /* (N, L, C): ::2 on the channels */
  ck_assert_msg(strstr(ntk_error_message(), "idx indexes the channel axis"), "%s", ntk_error_message());
  ck_assert_int_eq(ntk_index_axis(&a.layers[4], 4, 4, 1, 2, keep, &m), -1); /* 2: on 2 rows */
  ck_assert_msg(strstr(ntk_error_message(), "keeps no position of the H axis of 2"), "%s", ntk_error_message());
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  a = parse_ok("Index(Slice[1:, :, :, :]) GlobalAvgPool");
  ck_assert_int_eq(ntk_index_axis(&a.layers[0], 4, 0, 1, 4, keep, &m), -1);
  ck_assert_msg(strstr(ntk_error_message(), "idx indexes the batch axis"), "%s", ntk_error_message());
  ntk_arch_free(&a);
  parse_bad("Conv(2) Index(Slice[:, 0]) GlobalAvgPool", "an integer index removes its axis");
  parse_bad("Conv(2) Index(Slice[:, ::0]) GlobalAvgPool", "a slice step cannot be zero");
  parse_bad("Conv(2) Index(Slice[..., 1:, ...]) GlobalAvgPool", "more than one Ellipsis");
  parse_bad("Conv(2) Index((slice(None), slice(1, 2))) GlobalAvgPool", "idx must be written with stax's helper");
  parse_bad("Conv(2) Index GlobalAvgPool", "Index needs its idx");
  parse_bad("Conv(2) Index(Slice[:, 1:], mask=1) GlobalAvgPool", "unknown argument mask for Index");
  parse_bad("Conv(2) Index(Slice[:, 1:], channel_axis=1) GlobalAvgPool", "channel_axis=1");
  parse_bad("Conv(2) Index(Slice[:, :, :, :, :, :]) GlobalAvgPool", "more than 5 items");
}
END_TEST

START_TEST(test_image_resize) {
  struct ntk_arch a = parse_ok("Conv(2) ImageResize((-1, 8, 6, -1), 'bilinear') Relu stax.ImageResize(shape=(-1, "
                               "-1, 3, -1), method=ResizeMethod.NEAREST, antialias=False, precision=None) "
                               "ImageResize((-1, 4, 4, -1), LINEAR, False) GlobalAvgPool Dense");
  const struct ntk_layer *l = &a.layers[1];
  ck_assert_int_eq(l->kind, NTK_LAYER_RESIZE);
  ck_assert_int_eq(l->resize_len, 4);
  ck_assert_int_eq(l->resize[1], 8);
  ck_assert_int_eq(l->resize[2], 6);
  ck_assert_int_eq(l->nearest, 0);
  ck_assert_int_eq(l->antialias, 1);
  ck_assert_int_eq(a.layers[3].nearest, 1);
  ck_assert_int_eq(a.layers[3].resize[1], -1);
  ck_assert_int_eq(a.layers[4].antialias, 0);
  char buf[2048], again[2048];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "ImageResize((-1, 8, 6, -1), 'linear') Relu ImageResize((-1, -1, 3, -1), 'nearest') "
                            "ImageResize((-1, 4, 4, -1), 'linear', antialias=False) GlobalAvgPool"), "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  a = parse_ok("Conv(3, (3,), padding='SAME') ImageResize((-1, 9, -1), 'nearest') GlobalAvgPool");
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "ImageResize((-1, 9, -1), 'nearest')"), "%s", buf);
  ntk_arch_free(&a);
  parse_bad("ImageResize((-1, 4, 4, -1)) GlobalAvgPool", "ImageResize needs its shape and method");
  parse_bad("ImageResize((-1, 4, 4, -1), 'cubic') GlobalAvgPool", "method cubic has no kernel in neural-tangents");
  parse_bad("ImageResize((-1, 4, 4, -1), 'area') GlobalAvgPool", "method must be 'linear'");
  parse_bad("ImageResize((2, 4, 4, -1), 'linear') GlobalAvgPool", "must keep the batch and the channels");
  parse_bad("ImageResize((-1, 0, 4, -1), 'linear') GlobalAvgPool", "shape entry 0 is not -1 or an integer");
  parse_bad("ImageResize((-1, 4.5, 4, -1), 'linear') GlobalAvgPool", "shape entry 4.5 is not -1 or an integer");
  parse_bad("ImageResize((-1, 4), 'linear') GlobalAvgPool", "shape must be a tuple of 3 or 4 integers");
  parse_bad("ImageResize(4, 'linear') GlobalAvgPool", "shape must be a tuple of 3 or 4 integers");
  parse_bad("ImageResize((-1, 4, 4, -1), 'linear', antialias=2) GlobalAvgPool", "antialias must be True or False");
  /* a linear map of a Gaussian: Gaussian; of a nonlinearity's output: not */
  parse_bad("Conv(2) Relu ImageResize((-1, 4, 4, -1), 'linear') Relu GlobalAvgPool", "must follow Dense or Conv");
  a = parse_ok("Conv(2) ImageResize((-1, 4, 4, -1), 'linear') Relu GlobalAvgPool");
  ntk_arch_free(&a);
}
END_TEST

START_TEST(test_dropout) {
  struct ntk_arch a = parse_ok("Dense Dropout(0.5) Dense Relu stax.Dropout(rate=0.25, mode='train') Dense "
                               "Dropout(0.9, test) Dropout(1) Dense");
  ntk_layer_kind want[] = {NTK_LAYER_DENSE, NTK_LAYER_DROPOUT, NTK_LAYER_DENSE, NTK_LAYER_MAP,    NTK_LAYER_DROPOUT,
                           NTK_LAYER_DENSE, NTK_LAYER_IDENTITY, NTK_LAYER_DROPOUT, NTK_LAYER_DENSE};
  ck_assert_uint_eq(a.n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < a.n; i++) ck_assert_msg(a.layers[i].kind == want[i], "layer %zu: %d", i, a.layers[i].kind);
  ck_assert_double_eq(a.layers[1].rate, 0.5);
  ck_assert_double_eq(a.layers[4].rate, 0.25);
  ck_assert_double_eq(a.layers[7].rate, 1.0);
  char buf[1024], again[1024];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "Dropout(0.25) Dense(W_std=1, b_std=0) Identity Dropout(1) Dense"), "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  /* in a block after an affine layer; a fed branch and an Identity concatenated are fed */
  a = parse_ok("Dense FanOut(2) parallel(serial(Relu, Dense, Dropout(0.5)), Identity) FanInProd Dense");
  ntk_arch_free(&a);
  a = parse_ok("FanOut(2) parallel(Dense, Identity) FanInConcat Dropout(0.5) Dense");
  ntk_arch_free(&a);
  parse_bad("Dense Dropout(0.5) Relu Dense", "a nonlinearity must follow Dense or Conv");
  parse_bad("Dense Dropout(0.5) LayerNorm Dense", "LayerNorm must follow Dense or Conv");
  parse_bad("Dense FanOut(2) parallel(Dropout(0.5), Identity) FanInSum Dense", "every branch must end Gaussian");
  parse_bad("Dropout(0.5) Dense", "Dropout must come after a Dense or Conv");
  parse_bad("Flatten Dropout(0.5) Dense", "Dropout must come after a Dense or Conv");
  parse_bad("FanOut(2) parallel(Dense, Dropout(0.5)) FanInProd Dense", "layer 4 (Dropout): Dropout must come after");
  parse_bad_at("Dense Dropout Dense", 7, "Dropout needs its rate");
  parse_bad_at("Dense Dropout(0) Dense", 15, "rate must be > 0 and <= 1");
  parse_bad("Dense Dropout(1.5) Dense", "rate must be > 0 and <= 1 (stax's keep rate: 1 keeps every unit), not 1.5");
  parse_bad("Dense Dropout(-0.5) Dense", "rate must be > 0 and <= 1");
  parse_bad("Dense Dropout((1, 2)) Dense", "not a list");
  parse_bad("Dense Dropout(0.5, mode='eval') Dense", "mode must be 'train' or 'test', not eval");
  parse_bad("Dense Dropout(0.5, 'train', 3) Dense", "too many positional arguments for Dropout");
  parse_bad("Dense Dropout(0.5, rng=1) Dense", "unknown argument rng for Dropout");
}
END_TEST

/* LayerNorm's axis: the channels (-1, the default, any spelling of it the
 * same layer), and the data's spatial axes, resolved against the data's
 * rank: rows (H, or L), columns (W); the channels must be among them, the
 * batch must not, and an axis outside the rank is refused. */
START_TEST(test_layernorm_axes) {
  struct ntk_arch a = parse_ok("Dense LayerNorm(axis=(1, 2, 3)) Relu Dense LayerNorm(axis=-1) Relu Dense "
                               "LayerNorm((-1,), 0.5) Erf Dense stax.LayerNorm(axis=(-2, -1), eps=0.1) Relu Dense "
                               "LayerNorm(axis=[1, 3])");
  ck_assert_int_eq(a.layers[1].ln_axes, 1 << 5 | 1 << 6 | 1 << 7);
  ck_assert_int_eq(a.layers[4].ln_axes, 0);
  ck_assert_int_eq(a.layers[7].ln_axes, 0);
  ck_assert_double_eq(a.layers[7].map.a, 0.5);
  char buf[1024], again[1024];
  ntk_arch_canonical(&a, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "LayerNorm(axis=(1, 2, 3), eps=1e-12) Relu") && strstr(buf, "Dense(W_std=1, b_std=0) "
                "LayerNorm Relu") && strstr(buf, "LayerNorm(eps=0.5) Erf") && strstr(buf, "LayerNorm(axis=(-2, -1), "
                "eps=0.1) Relu") && strstr(buf, "LayerNorm(axis=(1, 3), eps=1e-12)"), "%s", buf);
  struct ntk_arch b = parse_ok(buf);
  ntk_arch_canonical(&b, again, sizeof again);
  ck_assert_str_eq(buf, again);
  int h, w;
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[1], 4, 1, &h, &w), 0);
  ck_assert(h && w);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[4], 2, 4, &h, &w), 0);
  ck_assert(!h && !w);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[10], 4, 10, &h, &w), 0); /* (-2, -1) on images: the columns */
  ck_assert(!h && w);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[10], 3, 10, &h, &w), 0); /* on (N, L, C): the length */
  ck_assert(h && !w);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[13], 4, 13, &h, &w), 0); /* (1, 3): the rows */
  ck_assert(h && !w);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[1], 3, 1, &h, &w), -1); /* 3 is outside (N, L, C) */
  ck_assert_msg(strstr(ntk_error_message(), "layer 2 (LayerNorm): axis 3 is outside data of 3 axes (N, L, C)"), "%s",
                ntk_error_message());
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[1], 2, 1, &h, &w), -1);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[13], 3, 13, &h, &w), -1); /* (1, 3) leaves (N, L, C)'s channels out */
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  a = parse_ok("Dense LayerNorm(axis=(1, 2)) Dense LayerNorm(axis=(-4, -1)) Dense");
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[1], 4, 1, &h, &w), -1);
  ck_assert_msg(strstr(ntk_error_message(), "leave the channels (axis -1) out"), "%s", ntk_error_message());
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[1], 3, 1, &h, &w), 0); /* (1, 2) on (N, L, C): all of it */
  ck_assert(h && !w);
  ck_assert_int_eq(ntk_layernorm_axes(&a.layers[3], 4, 3, &h, &w), -1);
  ck_assert_msg(strstr(ntk_error_message(), "axis -4 is the batch axis"), "%s", ntk_error_message());
  ntk_arch_free(&a);
  parse_bad("Dense LayerNorm(axis=0) Dense", "LayerNorm over the batch axis 0");
  parse_bad("Dense LayerNorm(axis=(0, 1, 2, 3)) Dense", "LayerNorm over the batch axis 0");
  parse_bad("Dense LayerNorm(axis=4) Dense", "axis 4 is not an axis of ntkd's data");
  parse_bad("Dense LayerNorm(axis=(1, -5)) Dense", "axis -5 is not an axis");
  parse_bad("Dense LayerNorm(axis=1.5) Dense", "axis 1.5 is not an axis");
  parse_bad("Dense LayerNorm(axis=('a', 'b')) Dense", "axis must be an integer or a tuple of them");
}
END_TEST

/* ElementwiseNumerical(fn, deg, df=None): fn as notebooks write it, from
 * jax.nn, jnp or np, or by its short name; those with a closed form become
 * that map; deg checked and not part of the network's identity. */
START_TEST(test_elementwise_numerical) {
  static const struct {
    const char *arch;
    int fn;
    double alpha;
  } ok[] = {
      {"Dense stax.ElementwiseNumerical(jnp.tanh, deg=25) Dense", NTK_FN_TANH, 0},
      {"Dense ElementwiseNumerical(np.tanh, 101) Dense", NTK_FN_TANH, 0},
      {"Dense ElementwiseNumerical(fn=jax.nn.sigmoid, deg=3, df=None) Dense", NTK_FN_SIGMOID, 0},
      {"Dense ElementwiseNumerical(jax.nn.softplus) Dense", NTK_FN_SOFTPLUS, 0},
      {"Dense ElementwiseNumerical(jax.nn.swish, 5) Dense", NTK_FN_SILU, 0},
      {"Dense ElementwiseNumerical(Silu) Dense", NTK_FN_SILU, 0},
      {"Dense ElementwiseNumerical(jax.nn.elu, 9) Dense", NTK_FN_ELU, 1.0},
      {"Dense ElementwiseNumerical(Selu) Dense", NTK_FN_SELU, NTK_SELU_ALPHA},
      {"Dense ElementwiseNumerical(jax.nn.celu) Dense", NTK_FN_CELU, 1.0},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    struct ntk_arch a = parse_ok(ok[i].arch);
    ck_assert_uint_eq(a.n, 3);
    const struct ntk_layer *l = &a.layers[1];
    ck_assert_msg(l->kind == NTK_LAYER_MAP && l->map.kind == NTK_MAP_NUMERICAL && l->map.degree == ok[i].fn &&
                      l->map.a == ok[i].alpha,
                  "%s: kind %d map %d fn %d a %g", ok[i].arch, l->kind, l->map.kind, l->map.degree, l->map.a);
    char buf[512], again[512];
    ntk_arch_canonical(&a, buf, sizeof buf);
    char want[64];
    snprintf(want, sizeof want, "ElementwiseNumerical(%s)", ntk_numfn_name(ok[i].fn));
    ck_assert_msg(strstr(buf, want) && !strstr(buf, "deg"), "%s -> %s", ok[i].arch, buf);
    struct ntk_arch b = parse_ok(buf);
    ntk_arch_canonical(&b, again, sizeof again);
    ck_assert_str_eq(buf, again);
    ntk_arch_free(&a);
    ntk_arch_free(&b);
  }
  /* closed forms: the same layer as the stax name */
  static const char *const closed[][2] = {{"jnp.sin", "Sin"}, {"np.cos", "Cos"}, {"jnp.exp", "Exp"},
                                          {"jnp.abs", "Abs"}, {"jax.nn.relu", "Relu"}, {"jax.scipy.special.erf", "Erf"}};
  for (size_t i = 0; i < sizeof closed / sizeof closed[0]; i++) {
    char s1[128], s2[128], c1[256], c2[256];
    snprintf(s1, sizeof s1, "Dense ElementwiseNumerical(%s, deg=7) Dense", closed[i][0]);
    snprintf(s2, sizeof s2, "Dense %s Dense", closed[i][1]);
    struct ntk_arch a = parse_ok(s1), b = parse_ok(s2);
    ntk_arch_canonical(&a, c1, sizeof c1);
    ntk_arch_canonical(&b, c2, sizeof c2);
    ck_assert_str_eq(c1, c2);
    ck_assert(!memcmp(&a.layers[1].map, &b.layers[1].map, sizeof a.layers[1].map));
    ntk_arch_free(&a);
    ntk_arch_free(&b);
  }
  parse_bad_at("Dense ElementwiseNumerical(jnp.foo) Dense", 28, "ElementwiseNumerical: unknown fn 'jnp.foo' (ntkd knows tanh");
  /* A known name quoted is a string, not the function: refused, saying so (it once said "unknown fn 'Tanh'
   * (ntkd knows ... Tanh ...)"). */
  parse_bad_at("Dense ElementwiseNumerical('tanh') Dense", 28,
               "ElementwiseNumerical: fn is the string 'tanh'; as in stax it takes the function: write it unquoted");
  parse_bad("Dense ElementwiseNumerical(\"Tanh\", 5) Dense", "fn is the string 'Tanh'");
  parse_bad("Dense ElementwiseNumerical('jnp.foo') Dense", "unknown fn");
  parse_bad("Dense ElementwiseNumerical(TANH_, 3) Dense", "unknown fn");
  parse_bad_at("Dense ElementwiseNumerical(lambda x: jnp.tanh(x), 3) Dense", 28, "not a lambda");
  parse_bad("Dense ElementwiseNumerical(deg=3) Dense", "ElementwiseNumerical needs fn");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, 0) Dense", "deg must be an integer from 1");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, 2.5) Dense", "deg must be an integer from 1");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, 3, df=jax.grad(jnp.tanh)) Dense", "");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, 3, df=dtanh) Dense", "df must be None");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, 3, None, 4) Dense", "too many positional arguments");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, fn=jnp.sin) Dense", "fn given twice");
  parse_bad("Dense ElementwiseNumerical(jnp.tanh, order=2) Dense", "unknown argument order");
  parse_bad("ElementwiseNumerical(jnp.tanh) Dense", "a nonlinearity must follow Dense or Conv");
}
END_TEST

/* A repeat count that is not an integer from 0 to the layer limit is
 * refused at its column, saying what was written, what is allowed and the
 * limit; so is a count whose expansion would pass the limit, before
 * anything is expanded (nested groups too). */
START_TEST(test_repeat_counts) {
  parse_bad_at("[Dense Relu]*100000000", 14,
               "repeat count 100000000 is above the limit of 100000 (an arch string has at most 100000 layers, "
               "repeats expanded)");
  parse_bad_at("[Dense Relu]*100001", 14, "repeat count 100001 is above the limit of 100000");
  parse_bad_at("[Dense Relu]*123456789012345678901234567890", 14,
               "repeat count 123456789012345678901234567890 is above the limit of 100000");
  parse_bad_at("[Dense Relu]*18446744073709551617", 14, "repeat count 18446744073709551617 is above the limit");
  parse_bad_at("[Dense Relu]*-1", 14, "repeat count must be an integer from 0 to 100000, not -1");
  parse_bad_at("[Dense Relu] * -1", 16, "repeat count must be an integer from 0 to 100000, not -1");
  parse_bad_at("[Dense Relu]*1.5", 14, "repeat count must be an integer from 0 to 100000, not 1.5");
  parse_bad_at("[Dense Relu]*1e3", 14, "repeat count must be an integer from 0 to 100000, not 1e3");
  parse_bad_at("[Dense Relu]*+3", 14, "repeat count must be an integer from 0 to 100000, not +3");
  parse_bad_at("[Dense Relu]*three", 14, "repeat count must be an integer from 0 to 100000, not 'three'");
  parse_bad_at("[Dense Relu]*", 14, "repeat count is missing: an integer from 0 to 100000");
  parse_bad_at("[Dense Relu]*(2)", 14, "repeat count is missing: an integer from 0 to 100000");
  /* the limit counts layers, repeats expanded: up to it accepted */
  struct ntk_arch a = parse_ok("[Dense]*100000");
  ck_assert_uint_eq(a.n, 100000);
  ntk_arch_free(&a);
  a = parse_ok("Dense [Relu Dense]*49999 [Relu Dense]*0 Identity");
  ck_assert_uint_eq(a.n, 100000);
  ntk_arch_free(&a);
  parse_bad_at("Dense [Dense]*100000", 15,
               "repeat count 100000 makes a group of 1 layer 100000 layers, at least 100001 in all: above the limit "
               "of 100000 layers of an arch string (repeats expanded)");
  parse_bad_at("[[Dense Relu]*1000]*1000", 21, "repeat count 1000 makes a group of 2000 layers 2000000 layers");
  parse_bad_at("[[[Dense]*100]*100]*100", 21, "repeat count 100 makes a group of 10000 layers 1000000 layers");
  parse_bad_at("[Dense]*100000 Relu", 16, "more than 100000 layers, the limit of an arch string (repeats expanded)");
}
END_TEST

/* Every other integer of an arch string (widths, filters, windows and
 * strides, alone or in tuples, a block's branches): its range accepted
 * up to both ends, anything outside refused naming the layer, the
 * argument, the value as written and the range or limit; never wrapped
 * into range. */
START_TEST(test_integer_arguments) {
  struct ntk_arch a = parse_ok("Dense(1000000) Relu Dense(1)");
  ck_assert(a.layers[0].width == 1000000 && a.layers[2].width == 1);
  ntk_arch_free(&a);
  a = parse_ok("Conv(1000000, (1000000, 1), strides=(1, 1000000)) Relu AvgPool((1, 1000000), 1000000) Flatten");
  ck_assert(a.layers[0].width == 1000000 && a.layers[0].filter == 1000000 && a.layers[0].stride_w == 1000000);
  ck_assert(a.layers[2].window_w == 1000000 && a.layers[2].stride == 1000000);
  ntk_arch_free(&a);
  parse_bad_at("Dense(1000001)", 7, "Dense: out_dim 1000001 is above the limit of 1000000 (ntkd's limit on widths and sizes)");
  parse_bad("Dense(4294967297)", "Dense: out_dim 4294967297 is above the limit of 1000000");
  parse_bad("Dense(99999999999999999999999)", "Dense: out_dim 99999999999999999999999 is above the limit of 1000000");
  parse_bad("Dense(0)", "Dense: out_dim must be an integer from 1 to 1000000, not 0");
  parse_bad("Dense(-5)", "Dense: out_dim must be an integer from 1 to 1000000, not -5");
  parse_bad("Dense(5.5)", "Dense: out_dim must be an integer from 1 to 1000000, not 5.5");
  parse_bad("Dense((5, 5))", "Dense: out_dim must be an integer from 1 to 1000000, not a list");
  parse_bad("Conv(out_chan=2147483648, filter_shape=(3, 3))", "Conv: out_chan 2147483648 is above the limit of 1000000");
  parse_bad("Conv(1000001)", "Conv: filter 1000001 is above the limit of 1000000");
  parse_bad("Conv(-3)", "Conv: filter must be an integer from 1 to 1000000, not -3");
  parse_bad_at("Conv(32, (3, 4294967299))", 10, "Conv: filter 4294967299 is above the limit of 1000000");
  parse_bad("Conv(32, (3, 1e300))", "Conv: filter 1e+300 is above the limit of 1000000");
  parse_bad("Conv(32, (3, -1))", "Conv: filter must be an integer from 1 to 1000000, not -1");
  parse_bad("Conv(32, (3, 2.5))", "Conv: filter must be an integer from 1 to 1000000, not 2.5");
  parse_bad("Conv(32, (3, 3, 3))", "Conv: filter: expected n, (h, w) or, for 1-D data, (n,): 3 values given");
  parse_bad("Conv(3, 0)", "Conv: stride must be an integer from 1 to 1000000, not 0");
  parse_bad("Conv(32, (3, 3), strides=(1, 1000001))", "Conv: stride 1000001 is above the limit of 1000000");
  parse_bad("Conv(3) AvgPool(1000001)", "AvgPool: window 1000001 is above the limit of 1000000");
  parse_bad("Conv(3) SumPool((2, 2), (0, 1))", "SumPool: stride must be an integer from 1 to 1000000, not 0");
  char text[1024] = "Dense FanOut(64) parallel(Dense";
  for (int b = 1; b < 64; b++) strcat(text, ", Dense");
  strcat(text, ") FanInSum");
  a = parse_ok(text);
  ck_assert(a.layers[1].branches == 64);
  ntk_arch_free(&a);
  parse_bad_at("Dense FanOut(65) parallel(Dense) FanInSum", 14,
               "FanOut: the number of branches 65 is above the limit of 64 (ntkd's limit)");
  parse_bad("Dense FanOut(99999999999999999999) parallel(Dense) FanInSum", "branches 99999999999999999999 is above");
  parse_bad("Dense FanOut(0) parallel(Dense) FanInSum", "FanOut: the number of branches must be an integer from 1 to "
                                                        "64, not 0");
  parse_bad("Dense FanOut(-1) parallel(Dense) FanInSum", "must be an integer from 1 to 64, not -1");
  parse_bad("Dense FanOut(1.5) parallel(Dense) FanInSum", "must be an integer from 1 to 64, not 1.5");
  parse_bad_at("Conv(123456789012345678901234567890123456789012345678901234567890)", 6,
               "'123456789012345678901234...' is longer than 47 characters");
}
END_TEST

/* A value inside the parameter's domain: the lower end when closed, one
 * above an open one, 0.5 where any number goes. */
static void inside(const struct ntk_param *pm, char *buf, size_t cap) {
  if (pm->type == NTK_PARAM_LIST) snprintf(buf, cap, "[1]");
  else if (pm->type == NTK_PARAM_BOOL) snprintf(buf, cap, "False");
  else if (isinf(pm->domain.lo)) snprintf(buf, cap, "0.5");
  else snprintf(buf, cap, "%.17g", pm->domain.lo + (pm->domain.lo_open ? 1 : 0));
}

/* "Dense NAME(k0=..., k1=...) Dense" with parameter k set to `value` and
 * every other required one inside its domain. */
static void map_text(const struct ntk_map_name *nm, int k, const char *value, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "Dense %s(", nm->name);
  for (int j = 0, first = 1; j < NTK_MAP_MAXPARAMS && nm->params[j].key; j++) {
    char v[64];
    if (j == k) snprintf(v, sizeof v, "%s", value);
    else if (isnan(nm->params[j].dflt)) inside(&nm->params[j], v, sizeof v);
    else continue;
    n += (size_t)snprintf(buf + n, cap - n, "%s%s=%s", first ? "" : ", ", nm->params[j].key, v);
    first = 0;
  }
  snprintf(buf + n, cap - n, ") Dense");
}

static void map_accepts(const struct ntk_map_name *nm, int k, double v) {
  char value[64], text[256];
  snprintf(value, sizeof value, "%.17g", v);
  map_text(nm, k, value, text, sizeof text);
  struct ntk_arch a = parse_ok(text);
  ck_assert_msg(a.layers[1].param[k] == v, "%s: %s read as %g, not %s", text, nm->params[k].key, a.layers[1].param[k],
                value);
  ntk_arch_free(&a);
}

static void map_refuses(const struct ntk_map_name *nm, int k, double v) {
  char value[64], text[256], needle[128];
  snprintf(value, sizeof value, "%.17g", v);
  map_text(nm, k, value, text, sizeof text);
  snprintf(needle, sizeof needle, "%s: %s must be ", nm->name, nm->params[k].key);
  parse_bad(text, needle);
  snprintf(needle, sizeof needle, ", not %s", value);
  ck_assert_msg(strstr(ntk_error_message(), needle), "'%s': message '%s' lacks '%s'", text, ntk_error_message(),
                needle);
}

/* Parameters outside a nonlinearity's domain (src/kernels/layers.c, docs/JOB-FILE.md)
 * are refused, naming the parameter, the value and the domain: the named
 * cases, then every bound of every parameter of the table, just inside
 * accepted and just outside refused. */
START_TEST(test_nonlinearity_domains) {
  parse_bad_at("Dense Rbf(gamma=-1) Dense", 17, "Rbf: gamma must be > 0, not -1");
  parse_bad("Dense Rbf(-1) Dense", "Rbf: gamma must be > 0, not -1");
  parse_bad("Dense Rbf(0) Dense", "Rbf: gamma must be > 0, not 0");
  parse_bad("Dense Rbf(-1e-300) Dense", "Rbf: gamma must be > 0, not -1e-300");
  parse_bad("Dense Rbf(x) Dense", "Rbf: gamma must be a number > 0, not 'x'");
  parse_bad("Dense ExpNormalized(0) Dense", "ExpNormalized: gamma must be > 0, not 0");
  parse_bad("Dense ExpNormalized(gamma=-2, shift=0) Dense", "ExpNormalized: gamma must be > 0, not -2");
  parse_bad("Dense Monomial(-1) Dense", "Monomial: degree must be an integer from 0 to 5, not -1");
  parse_bad("Dense RectifiedMonomial(1001) Dense", "RectifiedMonomial: degree must be an integer from 0 to 1000, "
                                                   "not 1001");
  parse_bad("Dense RectifiedMonomial(-1) Dense", "RectifiedMonomial: degree must be an integer from 0 to 1000, not -1");
  parse_bad("Dense Hermite(99999999999999999999) Dense", "Hermite: degree must be an integer from 0 to 1000, not "
                                                         "99999999999999999999");
  parse_bad("Dense LayerNorm(eps=-5e-324) Dense", "LayerNorm: eps must be a number >= 0, not -5e-324");
  parse_bad("Dense(W_std=-5e-324) Relu Dense", "Dense: W_std must be a number >= 0, not -5e-324");
  parse_bad("Conv(3, b_std=-1) Relu Flatten", "Conv: b_std must be a number >= 0 or None, not -1");
  struct ntk_arch a = parse_ok("Dense Rbf(5e-324) Dense Rbf(1e-300) Dense ExpNormalized(1e-300, -1e300) Dense "
                               "Monomial(0) Dense Monomial(5) Dense RectifiedMonomial(1000) Dense Hermite(1000) Dense "
                               "LayerNorm(eps=0) Dense(W_std=0, b_std=0) LeakyRelu(-1e300) Dense ABRelu(-3, 7) Dense "
                               "Erf(-2, -3, -4) Dense Sin(-1, -1, -1) Dense Exp(-2, -3) Dense Gaussian(-1, 2) Dense "
                               "Polynomial([]) Dense Polynomial([-1e300, 0.5]) Dense");
  ck_assert(a.layers[1].map.a == 5e-324 && a.layers[9].map.degree == 5 && a.layers[13].map.degree == 1000);
  ntk_arch_free(&a);
  size_t count;
  const struct ntk_map_name *names = ntk_map_names(&count);
  int bounds = 0;
  for (size_t i = 0; i < count; i++) {
    const struct ntk_map_name *nm = &names[i];
    int required = 0;
    for (int k = 0; k < NTK_MAP_MAXPARAMS && nm->params[k].key; k++) {
      const struct ntk_param *pm = &nm->params[k];
      const struct ntk_domain *d = &pm->domain;
      if (isnan(pm->dflt)) required = 1;
      else if (pm->type == NTK_PARAM_NUMBER || pm->type == NTK_PARAM_INT) /* a default is inside */
        ck_assert_msg((d->lo_open ? pm->dflt > d->lo : pm->dflt >= d->lo) && pm->dflt <= d->hi, "%s: %s's default",
                      nm->name, pm->key);
      if (pm->type == NTK_PARAM_INT) {
        ck_assert(!d->lo_open && isfinite(d->lo) && isfinite(d->hi));
        map_accepts(nm, k, d->lo);
        map_accepts(nm, k, d->hi);
        map_refuses(nm, k, d->lo - 1);
        map_refuses(nm, k, d->hi + 1);
        bounds += 2;
      } else if (pm->type == NTK_PARAM_NUMBER) {
        if (isfinite(d->lo)) {
          if (d->lo_open) map_refuses(nm, k, d->lo);
          else map_accepts(nm, k, d->lo);
          map_refuses(nm, k, nextafter(d->lo, -INFINITY));
          map_accepts(nm, k, nextafter(d->lo, INFINITY));
          bounds++;
        } else {
          map_accepts(nm, k, -DBL_MAX);
        }
        if (isfinite(d->hi)) {
          map_accepts(nm, k, d->hi);
          map_refuses(nm, k, nextafter(d->hi, INFINITY));
          bounds++;
        } else {
          map_accepts(nm, k, DBL_MAX);
        }
      }
    }
    if (!required) { /* every default inside: the name alone parses */
      char text[64];
      snprintf(text, sizeof text, "Dense %s Dense", nm->name);
      a = parse_ok(text);
      ntk_arch_free(&a);
    }
  }
  ck_assert_int_ge(bounds, 8); /* Rbf, ExpNormalized, and the three degrees at both ends */
}
END_TEST

/* The first field in which two layers differ, bit for bit (doubles by
 * their bytes: 0 and -0 differ, as do two NaNs' payloads), or NULL. */
static const char *layer_differs(const struct ntk_layer *x, const struct ntk_layer *y) {
#define FIELD(f) \
  if (memcmp(&x->f, &y->f, sizeof x->f)) return #f
  FIELD(kind);
  FIELD(w_std);
  FIELD(b_std);
  FIELD(map.kind);
  FIELD(map.degree);
  FIELD(map.flag);
  FIELD(map.a);
  FIELD(map.b);
  FIELD(map.c);
  FIELD(map.coef);
  FIELD(param);
  FIELD(filter);
  FIELD(stride);
  FIELD(window);
  FIELD(filter_w);
  FIELD(stride_w);
  FIELD(window_w);
  FIELD(one_d);
  FIELD(width);
  FIELD(sum);
  FIELD(branches);
  FIELD(normalize_edges);
  FIELD(bias);
  FIELD(padding);
  FIELD(name);
#undef FIELD
  return NULL;
}

/* `text` (a spelling copied from neural-tangents' Python) parses, under
 * parameterisation `standard`, to the same layers bit for bit as `own`
 * (ntkd's own spelling of the network), with the same canonical text. */
static void same_network(const char *text, const char *own, int standard) {
  struct ntk_arch a, b;
  ntk_status st = ntk_arch_parse_param(text, 1.0, 0.0, standard, &a);
  ck_assert_msg(st == NTK_OK, "'%s' should parse: %s", text, ntk_error_message());
  st = ntk_arch_parse_param(own, 1.0, 0.0, standard, &b);
  ck_assert_msg(st == NTK_OK, "'%s' should parse: %s", own, ntk_error_message());
  ck_assert_msg(a.n == b.n, "'%s': %zu layers, '%s': %zu", text, a.n, own, b.n);
  for (size_t i = 0; i < a.n; i++) {
    const char *f = layer_differs(&a.layers[i], &b.layers[i]);
    ck_assert_msg(!f, "'%s' and '%s': layer %zu differs in %s", text, own, i + 1, f ? f : "");
  }
  char ca[4096], cb[4096];
  ntk_arch_canonical(&a, ca, sizeof ca);
  ntk_arch_canonical(&b, cb, sizeof cb);
  ck_assert_str_eq(ca, cb);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
}

/* The comparison can say no: a one-ulp difference in a weight, a width, a padding. */
START_TEST(test_same_network_can_fail) {
  const char *pairs[][2] = {{"Dense(W_std=1.4142135623730951)", "Dense(W_std=1.4142135623730954)"},
                            {"Dense(512) Relu Dense", "Dense(511) Relu Dense"},
                            {"Conv(3, 1, SAME) Relu Flatten", "Conv(3, 1, CIRCULAR) Relu Flatten"},
                            {"Dense Erf(b=0.0) Dense", "Dense Erf(b=-0.0) Dense"}};
  for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    struct ntk_arch a = parse_ok(pairs[k][0]), b = parse_ok(pairs[k][1]);
    int differ = a.n != b.n;
    for (size_t i = 0; !differ && i < a.n; i++) differ = layer_differs(&a.layers[i], &b.layers[i]) != NULL;
    ck_assert_msg(differ, "'%s' and '%s' compare equal", pairs[k][0], pairs[k][1]);
    ntk_arch_free(&a);
    ntk_arch_free(&b);
  }
}
END_TEST

/* Constant expressions, as a notebook writes numbers: the value Python
 * computes in float64, bit for bit; anything else refused at its column. */
START_TEST(test_constant_expressions) {
  same_network("Dense(W_std=np.sqrt(2)) Relu Dense", "Dense(W_std=1.4142135623730951) Relu Dense", 0);
  same_network("Dense(W_std=2**0.5) Relu Dense(W_std=math.sqrt(2)) Erf Dense(W_std=jnp.sqrt(2.0))",
               "Dense(W_std=1.4142135623730951) Relu Dense(W_std=1.4142135623730951) Erf "
               "Dense(W_std=1.4142135623730951)", 0);
  same_network("Dense(W_std=numpy.sqrt(2), b_std=1/3) Relu Dense(W_std=jax.numpy.sqrt(8) / 2, b_std=1e-3)",
               "Dense(W_std=1.4142135623730951, b_std=0.3333333333333333) Relu Dense(W_std=1.4142135623730951, "
               "b_std=0.001)", 0);
  /* IEEE arithmetic as Python's: 0.1 + 0.2 is not 0.3 */
  same_network("Dense Erf(0.1 + 0.2, -0.5, math.pi) Dense Sin(np.e, -math.pi / 4, (1 + 2) * 3 / 4) Dense",
               "Dense Erf(0.30000000000000004, -0.5, 3.141592653589793) Dense Sin(2.718281828459045, "
               "-0.7853981633974483, 2.25) Dense", 0);
  /* precedence: -2**2 is -4, 2**-1 is 0.5, 2**3**2 is 512; an int stays an int (a width) */
  same_network("Dense(2**3**2) ABRelu(-2**2, 2**-1) Dense(2 * 256 - 1) Relu Dense(W_std=(2), b_std=((0.5)))",
               "Dense(512) ABRelu(-4, 0.5) Dense(511) Relu Dense(W_std=2, b_std=0.5)", 0);
  same_network("Dense Polynomial([1/2, np.sqrt(2), -(1), 2.]) Dense", "Dense Polynomial([0.5, 1.4142135623730951, "
               "-1, 2]) Dense", 0);
  struct ntk_arch a = parse_ok("Dense(W_std=2**0.5, b_std=1/3) Erf(0.1 * 3, .5 - 1e-3, -0.0 * 1) Dense");
  ck_assert(a.layers[0].w_std == pow(2, 0.5) && a.layers[0].w_std == sqrt(2.0) && a.layers[0].b_std == 1.0 / 3);
  ck_assert(a.layers[1].map.a == 0.1 * 3 && a.layers[1].map.a != 0.3 && a.layers[1].map.b == 0.5 - 1e-3);
  ck_assert(a.layers[1].map.c == 0 && signbit(a.layers[1].map.c)); /* -0.0 * 1 is -0.0 in Python */
  ntk_arch_free(&a);
  a = parse_ok("Dense Erf(c=-0 * 1) Dense"); /* an int has no -0: Python's -0 * 1 is 0 */
  ck_assert(a.layers[1].map.c == 0 && !signbit(a.layers[1].map.c));
  ntk_arch_free(&a);
  /* a sign, then a space: Python's - 0.5 is -0.5 */
  a = parse_ok("Dense Erf(- 0.5, + 2, c=- np.pi) Dense Polynomial([1, - 2, -  3 * 2]) Dense");
  ck_assert(a.layers[1].map.a == -0.5 && a.layers[1].map.b == 2 && a.layers[1].map.c == -NTK_PI);
  ck_assert(a.layers[3].map.coef[1] == -2 && a.layers[3].map.coef[2] == -6);
  ntk_arch_free(&a);
  parse_bad_at("Dense(W_std=1/0)", 14, "division by zero (ZeroDivisionError in Python)");
  parse_bad_at("Dense(W_std=0**-1)", 14, "0 to a negative power");
  parse_bad_at("Dense(W_std=(-8)**(1/3))", 17, "a negative number to a fractional power, which is complex in Python");
  parse_bad_at("Dense(W_std=np.sqrtt(2))", 13, "unknown function 'np.sqrtt' in a constant expression");
  parse_bad_at("Dense(W_std=np.sqrt(-2))", 13, "np.sqrt(-2): the square root of a negative number");
  parse_bad_at("Dense(W_std=x * 2)", 13, "unknown name 'x' in a constant expression");
  parse_bad_at("Dense(W_std=2 * math.tau)", 17, "unknown name 'math.tau'");
  parse_bad_at("Dense(W_std=2 % 3)", 15, "'%' is not in ntkd's constant expressions (+ - * / **)");
  parse_bad_at("Dense(W_std=7//2)", 14, "'//' is not in ntkd's constant expressions");
  parse_bad_at("Dense(W_std=10.0**400)", 17, "the result is too large for float64");
  parse_bad_at("Dense(W_std=1e308 * 10)", 19, "the result is too large for float64");
  parse_bad_at("Dense(W_std=012 + 1)", 13, "'012': an integer with a leading zero is a syntax error in Python");
  parse_bad_at("Dense(W_std=2**60 * 2)", 14, "integer arithmetic beyond 2**53, exact in Python and not in float64");
  /* 2**53 is where float64 stops being exact: 2**53 + 1 rounds to it, and so does 9007199254740993 as read.
   * Python: 2**52 + (2**52 + 1) + 1 is 9007199254740994, 9007199254740993 / 7 is 1286742750677284.75, 6 / 9007199254740993
   * is 6.661338147750938e-16 (float64 went on with 2**53: 9007199254740992, 1286742750677284.5, ...939e-16) */
  parse_bad_at("Dense(W_std=4503599627370496 + 4503599627370497 + 1)", 30, "integer arithmetic beyond 2**53");
  parse_bad_at("Dense(W_std=2**53)", 14, "integer arithmetic beyond 2**53");
  parse_bad_at("Dense(W_std=9007199254740993 / 7)", 30, "integer arithmetic beyond 2**53");
  parse_bad_at("Dense(W_std=6 / 9007199254740993)", 15, "integer arithmetic beyond 2**53");
  parse_bad_at("Dense(W_std=9007199254740993 - 1)", 30, "integer arithmetic beyond 2**53");
  a = parse_ok("Dense(W_std=9007199254740991 + 0 * 1) Relu Dense(W_std=9007199254740993 * 1.0)"); /* exact; float */
  ck_assert(a.layers[0].w_std == 9007199254740991.0 && a.layers[2].w_std == 9007199254740992.0);
  ntk_arch_free(&a);
  parse_bad_at("Dense(W_std=1 + )", 17, "expected a number in a constant expression, found ')'");
  parse_bad_at("Dense(W_std=(1 + 2)", 20, "expected ',' or ')' in argument list");
  parse_bad_at("Dense(W_std=2 * 1j)", 18, "expected an operator after a number in a constant expression, found 'j'");
  parse_bad_at("Dense(W_std=-np.sqrt(2))", 13, "Dense: W_std must be a number >= 0, not -1.4142135623730951");
  parse_bad_at("Dense(W_std=(2 * 3, 1))", 13, "Dense: W_std must be a number >= 0, not a list");
  char deep[200] = "Dense(W_std=";
  for (int i = 0; i < 70; i++) strcat(deep, "-");
  strcat(deep, "1)");
  parse_bad("Dense(W_std=-----------------------------------------------------------------------1)",
            "longer than 47 characters"); /* a word first, as ntkd always read values */
  parse_bad(deep, "longer than 47 characters");
  char parens[300] = "Dense(W_std=";
  for (int i = 0; i < 70; i++) strcat(parens, "(");
  strcat(parens, "1");
  for (int i = 0; i < 70; i++) strcat(parens, ")");
  strcat(parens, ")");
  parse_bad(parens, "a constant expression nested too deeply (the limit: 64 levels)");
}
END_TEST

/* stax's Padding enum and Python's trailing commas. */
START_TEST(test_python_values) {
  same_network("Conv(3, 1, Padding.SAME) Relu Conv(3, padding=stax.Padding.CIRCULAR) Relu Conv(3, 1, "
               "Padding.VALID.name) Relu Conv(3, padding=nt.stax.Padding.SAME.value) Relu "
               "Conv(3, padding=neural_tangents.stax.Padding.SAME) GlobalAvgPool",
               "Conv(3, 1, SAME) Relu Conv(3, padding=CIRCULAR) Relu Conv(3, 1, VALID) Relu Conv(3, padding=SAME) "
               "Relu Conv(3, padding=SAME) GlobalAvgPool", 0);
  same_network("Dense(512, W_std=2,) Relu Dense Polynomial([1, 2,],) Dense(W_std=1.5,  )",
               "Dense(512, W_std=2) Relu Dense Polynomial([1, 2]) Dense(W_std=1.5)", 0);
  parse_bad_at("Conv(3, padding='Padding.SAME') Relu Flatten", 17, "unknown padding 'Padding.SAME'");
  parse_bad_at("Conv(3, padding=Padding.SAMEISH) Relu Flatten", 17, "unknown padding 'Padding.SAMEISH'");
  parse_bad_at("Conv(3, padding=Padding.SAME.title) Relu Flatten", 17, "unknown padding");
  parse_bad_at("Dense(512, , W_std=2)", 12, "expected a value");
  parse_bad_at("Dense Polynomial([1, 'a']) Dense", 18, "coef wants a list of numbers");
  parse_bad_at("Conv(8, (3, 'a')) Relu Flatten", 9, "Conv: filter: a string in a list of sizes");
}
END_TEST

/* Issue 29's three strings, verbatim, and what they meant. */
START_TEST(test_issue29_strings) {
  /* 1. the stax. prefix: once "unknown layer 'stax'"; the "..." is the issue's, and refused where it stands */
  parse_bad_at("stax.serial(stax.Dense(512), stax.Relu(), ...)", 43, "unexpected character '.'");
  same_network("stax.serial(stax.Dense(512), stax.Relu(), stax.Dense(1))", "Dense(512) Relu Dense(1)", 0);
  /* 2. W_std and b_std by position, as stax takes them; num_classes is the README's Python variable */
  parse_bad_at("stax.Dense(num_classes, 1., 0.)", 12, "Dense: out_dim must be an integer from 1 to 1000000, not "
                                                       "'num_classes'");
  same_network("stax.Dense(10, 1., 0.)", "Dense(10, W_std=1, b_std=0)", 1);
  same_network("Conv(16, (3, 3), (1, 1), 'SAME', 1.5, 0.1) Relu Flatten",
               "Conv(16, (3, 3), strides=(1, 1), padding=SAME, W_std=1.5, b_std=0.1) Relu Flatten", 0);
  same_network("Conv(3) AvgPool((3, 3), (2, 2), 'SAME', True) SumPool((2, 2), (1, 1), 'SAME') Flatten",
               "Conv(3) AvgPool((3, 3), strides=(2, 2), padding=SAME, normalize_edges=True) "
               "SumPool((2, 2), strides=(1, 1), padding=SAME) Flatten", 0);
  /* 3. */
  same_network("Dense Relu(do_stabilize=True) Conv(3, padding=Padding.SAME, W_std=np.sqrt(2), b_std=2**0.5) "
               "Flatten",
               "Dense Relu Conv(3, padding=SAME, W_std=1.4142135623730951, b_std=1.4142135623730951) Flatten", 0);
}
END_TEST

/* The stax. prefixes, stax's combinators as a notebook writes them, and
 * every layer's positionals in stax's order. */
START_TEST(test_stax_prefix_and_positionals) {
  same_network("stax.Dense(512, 1.5, 0.05) nt.stax.Relu() neural_tangents.stax.Dense(1, np.sqrt(2), None)",
               "Dense(512, W_std=1.5, b_std=0.05) Relu Dense(1, W_std=1.4142135623730951, b_std=None)", 1);
  same_network("Dense(8, 2, 0.5, 0, -1, 'ntk', (1, 1)) Relu Dense", "Dense(8, W_std=2, b_std=0.5) Relu Dense", 0);
  same_network("Conv(8, (3, 3), (2, 2), Padding.SAME, 2, 0.5, None, 'ntk', (1, 1)) Relu GlobalAvgPool(0, -1) "
               "Dense(4)",
               "Conv(8, (3, 3), strides=(2, 2), padding=SAME, W_std=2, b_std=0.5) Relu GlobalAvgPool Dense(4)", 0);
  /* a stax. prefix reads the arguments as stax does: stax.AvgPool(2) has stride 1, ntkd's AvgPool(2) stride 2 */
  same_network("Conv(3) stax.AvgPool(2) AvgPool(2) stax.SumPool(2, None, 'VALID', 0) Flatten",
               "Conv(3) AvgPool(2, 1) AvgPool(2, 2) SumPool(2, 1) Flatten", 0);
  same_network("Conv(3) AvgPool((2, 2), None, 'VALID', False, 0, -1) Flatten(0, 0)",
               "Conv(3) AvgPool(2, 1) Flatten", 0);
  same_network("Dense Erf(1, 2, 0.5) Dense LeakyRelu(0.1, True) Dense ABRelu(-1, 2, False) Dense Abs(True) Dense "
               "LayerNorm(-1, 1e-6, 0, -1) Relu Dense Gelu(True)",
               "Dense Erf(a=1, b=2, c=0.5) Dense LeakyRelu(0.1) Dense ABRelu(-1, 2) Dense Abs Dense "
               "LayerNorm(eps=1e-6) Relu Dense Gelu", 0);
  /* a whole notebook network: nested serial, parallel, FanOut, FanInSum(), trailing commas */
  same_network("stax.serial(stax.Conv(16, (3, 3), padding='SAME'), stax.serial(stax.FanOut(2), stax.parallel("
               "stax.serial(stax.Relu(), stax.Conv(16, (3, 3), (1, 1), stax.Padding.SAME, np.sqrt(2), 0.0),), "
               "stax.Identity(),), stax.FanInSum(),), stax.FanOut(num=2), stax.parallel(stax.Identity(), "
               "stax.Conv(8, (1, 1))), stax.FanInConcat(axis=-1), stax.GlobalAvgPool(), stax.Dense(10, 1.0, 0.0),)",
               "Conv(16, (3, 3), padding=SAME) FanOut(2) parallel(serial(Relu Conv(16, (3, 3), padding=SAME, "
               "W_std=1.4142135623730951, b_std=0)), Identity) FanInSum FanOut(2) parallel(Identity, Conv(8, (1, 1))) "
               "FanInConcat GlobalAvgPool Dense(10, W_std=1, b_std=0)", 0);
  parse_bad_at("jax.example_libraries.stax.Dense", 1, "unknown layer 'jax.': before a layer's name ntkd reads the "
                                                       "prefixes stax., nt.stax. and neural_tangents.stax.");
  parse_bad_at("stax.Dence(512)", 6, "unknown layer 'Dence'");
  parse_bad_at("stax.Conv(3, SAME) Relu Flatten", 14, "Conv: filter must be an integer from 1 to 1000000, not "
                                                      "'SAME'"); /* stax's order under stax. */
  parse_bad_at("Dense FanOut(2) parallel(Dense, Dense) FanInSum(1)", 40, "FanInSum takes no arguments");
  parse_bad_at("Dense FanOut(n=2) parallel(Dense, Dense) FanInSum", 7, "FanOut takes the number of branches");
  parse_bad_at("Conv(3) AvgPool((2, 2), None, 'VALID', False, 0, -1, 7) Flatten", 54,
               "too many positional arguments for AvgPool");
  parse_bad_at("Conv(3) SumPool((2, 2), None, 'VALID', True) Flatten", 40, "SumPool: batch_axis='True': ntkd's samples are on axis 0");
  parse_bad_at("Dense Flatten(0, 0, 0)", 21, "too many positional arguments for Flatten");
  parse_bad_at("Dense Identity(0)", 7, "Identity takes no arguments");
}
END_TEST

/* stax's keywords: those that change nothing in the kernel accepted, the
 * others honoured or refused with the reason, at their column. */
START_TEST(test_stax_keywords) {
  same_network("Dense(4, batch_axis=0, channel_axis=-1) Relu(do_stabilize=False) Dense(channel_axis=None) "
               "Gelu(approximate=True) Dense(parameterization='ntk', s=(2, 3))",
               "Dense(4) Relu Dense Gelu Dense", 0);
  same_network("Dense(4, parameterization='standard', s=(1, 1)) Relu Dense(1, parameterization='standard')",
               "Dense(4) Relu Dense(1)", 1);
  same_network("Conv(4, (3, 3), dimension_numbers=('NHWC', 'HWIO', 'NHWC')) Relu Conv(4, (3, 3), "
               "dimension_numbers=('NABC', 'ABIO', 'NABC')) Relu Conv(4, (3, 3), dimension_numbers=None) Flatten(0, "
               "batch_axis_out=0) Dense",
               "Conv(4, (3, 3)) Relu Conv(4, (3, 3)) Relu Conv(4, (3, 3)) Flatten Dense", 0);
  same_network("Conv(4, (3,), dimension_numbers=('NWC', 'WIO', 'NWC')) Relu AvgPool((2,), batch_axis=0) "
               "GlobalSumPool(channel_axis=-1)",
               "Conv(4, (3,)) Relu AvgPool((2,)) GlobalSumPool", 0);
  parse_bad_at("Dense(512, batch_axis=1) Relu Dense", 23, "Dense: batch_axis=1: ntkd's samples are on axis 0");
  parse_bad_at("Dense(512, 1, 0, 1) Relu Dense", 18, "Dense: batch_axis=1: ntkd's samples are on axis 0");
  parse_bad_at("Dense(512, channel_axis=0) Relu Dense", 25, "Dense: channel_axis=0: ntkd's channels are the last axis");
  parse_bad_at("Conv(3) GlobalAvgPool(channel_axis=1) Dense", 36, "GlobalAvgPool: channel_axis=1");
  parse_bad_at("Conv(3) Flatten(batch_axis_out=1) Dense", 32, "Flatten: batch_axis_out=1: ntkd's samples are on axis 0");
  parse_bad_at("Dense LayerNorm(channel_axis=1)", 30, "LayerNorm: channel_axis=1");
  parse_bad_at("Dense(512, parameterization='standard') Relu Dense", 29,
               "Dense: parameterization='standard', and this job's is 'ntk': ntkd gives every layer one "
               "parameterization, [model] parameterization = standard");
  parse_bad_at("Dense(512, parameterization='NTK') Relu Dense", 29,
               "Dense: parameterization must be 'ntk' or 'standard', not 'NTK'");
  struct ntk_arch a;
  ck_assert_int_eq(ntk_arch_parse_param("Dense(512, parameterization='ntk') Relu Dense", 1, 0, 1, &a), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "column 29: Dense: parameterization='ntk', and this job's is 'standard'"),
                "%s", ntk_error_message());
  ck_assert_int_eq(ntk_arch_parse_param("Dense(512, s=(2, 2)) Relu Dense", 1, 0, 1, &a), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "column 14: Dense: s=(2, 2): ntkd computes the standard "
                                            "parameterisation with s=(1, 1) only"),
                "%s", ntk_error_message());
  parse_bad_at("Conv(8, (3, 3), dimension_numbers=('NCHW', 'OIHW', 'NCHW')) Relu Flatten", 35,
               "Conv: dimension_numbers: ntkd's images are NHWC with HWIO filters");
  parse_bad_at("Conv(8, (3, 3), dimension_numbers=('NHWC', 'HWOI', 'NHWC')) Relu Flatten", 35, "dimension_numbers");
  parse_bad_at("Conv(8, (3, 3), dimension_numbers=('NHHC', 'HHIO', 'NHHC')) Relu Flatten", 35, "dimension_numbers");
  parse_bad_at("Dense Relu(do_stabilize=1) Dense", 25, "'1' is not True or False");
  parse_bad_at("Conv(3, batch_axis=0) Relu Flatten", 20, "unknown argument batch_axis for Conv");
  parse_bad_at("Dense(dimension_numbers=None)", 25, "unknown argument dimension_numbers for Dense");
}
END_TEST

/* An argument given twice is refused, as Python refuses it (SyntaxError or
 * "got multiple values for argument"); ntkd used to keep the last value, so
 * Dense(512, 2, W_std=3) silently computed W_std=3, Dense(W_std=2, W_std=3)
 * too, and Dense(512, W_std=2, b_std=0.1, 7) took 7 as W_std. */
START_TEST(test_argument_given_twice) {
  parse_bad_at("Dense(W_std=2, W_std=3) Relu Dense", 22, "W_std given twice");
  parse_bad_at("Dense(512, 2, W_std=3) Relu Dense", 21, "W_std given twice");
  parse_bad_at("Dense(b_std=0.5, b_std=None) Relu Dense", 24, "b_std given twice");
  parse_bad_at("Dense(512, W_std=2, b_std=0.1, 7) Relu Dense", 32, "a positional argument after a keyword argument");
  parse_bad_at("stax.Conv(3, (3, 3), (2, 2), strides=(1, 1)) Flatten Dense", 38, "stride given twice");
  parse_bad_at("Conv(3, 1, stride=1, strides=2) Flatten Dense", 19, "stride given twice");
  parse_bad_at("Conv(3, 1, SAME, padding=VALID) Flatten Dense", 26, "padding given twice");
  parse_bad_at("AvgPool(2, window_shape=(3, 3)) Flatten Dense", 25, "window given twice");
  parse_bad_at("Dense LayerNorm(-1, axis=(1, 2, 3)) Relu Dense", 26, "axis given twice");
  parse_bad_at("Dense Dropout(0.5, rate=0.9)", 25, "rate given twice");
  parse_bad_at("Conv(3) Flatten(0, batch_axis=0) Dense", 31, "batch_axis given twice");
  /* each once, positional then keyword, is as before */
  same_network("Dense(512, 2, b_std=0.5) Relu Dense", "Dense(512, W_std=2, b_std=0.5) Relu Dense", 0);
  same_network("stax.Conv(3, (3, 3), (2, 2), padding='SAME') Relu Flatten Dense", "Conv(3, (3, 3), strides=2, padding=SAME) Relu Flatten Dense",
               0);
}
END_TEST

START_TEST(test_error_column) {
  struct ntk_arch a;
  ck_assert_int_eq(ntk_arch_parse("Dense Relu Dense Foo", 1, 0, &a), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "column 18"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("arch");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, test_fc_layers);
  tcase_add_test(tc, test_global_defaults);
  tcase_add_test(tc, test_cnn_layers_and_repeat);
  tcase_add_test(tc, test_canonical);
  tcase_add_test(tc, test_canonical_of_a_long_polynomial);
  tcase_add_test(tc, test_bad_strings);
  tcase_add_test(tc, test_map_params);
  tcase_add_test(tc, test_stax_syntax);
  tcase_add_test(tc, test_standard);
  tcase_add_test(tc, test_residual);
  tcase_add_test(tc, test_fan_in_prod);
  tcase_add_test(tc, test_dropout);
  tcase_add_test(tc, test_conv_local);
  tcase_add_test(tc, test_attention);
  tcase_add_test(tc, test_image_resize);
  tcase_add_test(tc, test_index);
  tcase_add_test(tc, test_aggregate);
  tcase_add_test(tc, test_layernorm_axes);
  tcase_add_test(tc, test_elementwise_numerical);
  tcase_add_test(tc, test_error_column);
  tcase_add_test(tc, test_repeat_counts);
  tcase_add_test(tc, test_integer_arguments);
  tcase_add_test(tc, test_nonlinearity_domains);
  tcase_add_test(tc, test_same_network_can_fail);
  tcase_add_test(tc, test_constant_expressions);
  tcase_add_test(tc, test_python_values);
  tcase_add_test(tc, test_issue29_strings);
  tcase_add_test(tc, test_stax_prefix_and_positionals);
  tcase_add_test(tc, test_stax_keywords);
  tcase_add_test(tc, test_argument_given_twice);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
