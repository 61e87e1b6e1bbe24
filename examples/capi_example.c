/* Generates a short continuation through the k25 C API and prints it with the request's usage
 * and a few metrics.  Usage: capi_example MODEL.gguf [PROMPT] */
#include <stdio.h>
#include <string.h>

#include "k25.h"

struct output {
  char text[4096];
  size_t len;
  int completion_tokens;
  char finish_reason[16];
};

static void on_event(const k25_event* event, void* user_data) {
  struct output* out = (struct output*)user_data;
  size_t room = sizeof out->text - 1 - out->len;
  size_t n = event->text_len < room ? event->text_len : room;
  memcpy(out->text + out->len, event->text, n);
  out->len += n;
  out->text[out->len] = '\0';
  if (event->kind == K25_EVENT_FINISHED) {
    out->completion_tokens = event->completion_tokens;
    snprintf(out->finish_reason, sizeof out->finish_reason, "%s", event->finish_reason);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
    return 2;
  }
  char* error = NULL;
  k25_engine_options options;
  k25_engine_options_init(&options);
  options.n_threads = 1;
  k25_engine* engine = k25_load(argv[1], &options, &error);
  if (!engine) {
    fprintf(stderr, "error: %s\n", error);
    k25_free_string(error);
    return 1;
  }

  k25_request request;
  k25_request_init(&request);
  request.prompt = argc > 2 ? argv[2] : "Once upon a time";
  request.max_tokens = 24;
  request.temperature = 0.0f;
  request.latency_sla = "gold";

  struct output out;
  memset(&out, 0, sizeof out);
  int64_t id = k25_submit(engine, &request, on_event, &out, NULL, &error);
  if (id == 0) {
    fprintf(stderr, "error: %s\n", error);
    k25_free_string(error);
    k25_free(engine);
    return 1;
  }
  if (k25_wait(engine, id, -1) != 0) {
    fprintf(stderr, "error: request %lld did not finish\n", (long long)id);
    k25_free(engine);
    return 1;
  }
  printf("text: %s\n", out.text);
  printf("finish_reason: %s\ncompletion_tokens: %d\n", out.finish_reason, out.completion_tokens);

  char* metrics = k25_metrics(engine);
  const char* line = strstr(metrics, "\nk25_completion_tokens_total ");
  if (line) printf("%.*s\n", (int)strcspn(line + 1, "\n"), line + 1);
  k25_free_string(metrics);
  k25_free(engine);
  return out.completion_tokens > 0 ? 0 : 1;
}
