/* k25 as a library (R-API6): load a model, submit generation requests with their fingerprint
 * hints, receive tokens through a callback, cancel, read metrics. Plain C, opaque handles.
 *
 * Strings are UTF-8. Functions that can fail take `char** error`: on failure they set *error
 * (when error is not NULL) to a message to release with k25_free_string(). */
#ifndef K25_H_
#define K25_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct k25_engine k25_engine;

typedef struct k25_engine_options {
  int n_threads;      /* compute threads; <= 0: all cores */
  int max_batch_size; /* concurrent sequences; <= 0: 24 */
  int max_queue;      /* waiting requests before submit fails; < 0: 256 */
  int context_size;   /* tokens per sequence; <= 0: the model's context length */
} k25_engine_options;

/* Fills in the defaults above. */
void k25_engine_options_init(k25_engine_options* options);

typedef struct k25_request {
  const char* prompt;   /* required */
  int add_special;      /* add BOS/EOS as the vocabulary asks (default 1) */
  int max_tokens;       /* default 128 */
  float temperature;    /* 0: greedy (default 0.8) */
  float top_p;          /* default 0.95 */
  int top_k;            /* default 40; 0: off */
  float min_p;          /* default 0.05; 0: off */
  float repeat_penalty; /* default 1: off */
  int has_seed;         /* 1: use `seed` */
  uint64_t seed;
  const char* const* stop; /* stop strings, `n_stop` of them */
  size_t n_stop;
  const char* latency_sla; /* "gold", "silver" (default, NULL) or "bronze" */
  const char* domain_hint; /* NULL or "default" (no other gates yet) */
} k25_request;

/* Fills in the defaults above (prompt NULL). */
void k25_request_init(k25_request* request);

typedef enum k25_event_kind { K25_EVENT_TOKEN = 0, K25_EVENT_FINISHED = 1 } k25_event_kind;

typedef struct k25_event {
  k25_event_kind kind;
  int64_t request_id;
  int32_t token;    /* TOKEN: the sampled token */
  const char* text; /* text that became final (complete UTF-8, never part of a stop
                       string); on FINISHED the held-back rest. Not NUL-terminated
                       necessarily: use text_len. Valid during the callback only. */
  size_t text_len;
  /* FINISHED only: */
  const char* finish_reason; /* "stop", "length", "cancelled" or "error" */
  const char* error;         /* "error": why; otherwise "" */
  int prompt_tokens;
  int completion_tokens;
  double ttft_ms;
  double total_ms;
} k25_event;

/* Called on the engine's thread, in order, ending with one FINISHED event per request. Return
 * quickly and do not call k25 functions other than k25_cancel from it. */
typedef void (*k25_token_callback)(const k25_event* event, void* user_data);

/* Loads a GGUF file or Hugging Face directory and starts the engine. NULL on failure. */
k25_engine* k25_load(const char* model_path, const k25_engine_options* options, char** error);

/* Queues a request; returns its id (> 0), or 0 on failure (invalid request, prompt longer
 * than the context, queue full). */
int64_t k25_submit(k25_engine* engine, const k25_request* request, k25_token_callback callback,
                   void* user_data, char** error);

/* Cancels a request; it finishes with finish_reason "cancelled". Unknown ids are ignored. */
void k25_cancel(k25_engine* engine, int64_t request_id);

/* Blocks until the request has finished (its FINISHED callback returned): 0; timeout_ms < 0
 * waits without limit; 1 on timeout; -1 for an id never returned by k25_submit or already
 * waited for. */
int k25_wait(k25_engine* engine, int64_t request_id, int timeout_ms);

/* Metrics in the Prometheus text format; release with k25_free_string(). */
char* k25_metrics(k25_engine* engine);

void k25_free_string(char* text);

/* Cancels whatever runs, stops the engine and releases the model. NULL is ignored. */
void k25_free(k25_engine* engine);

#ifdef __cplusplus
}
#endif

#endif /* K25_H_ */
