/* k25 as a library (R-API6): load a model, submit generation requests with their fingerprint
 * hints, receive tokens through a callback or by polling, cancel, tokenise, read metrics. Plain
 * C, opaque handles.
 *
 * Strings are UTF-8. Functions that can fail take `char** error`: on failure they set *error
 * (when error is not NULL) to a message to release with k25_free_string().
 *
 * Versioning: K25_ABI_VERSION changes whenever a struct or a signature here changes
 * incompatibly; k25_abi_version() says which one the library was built with. The option and
 * request structs start with their size, set by their _init function, so that a library can
 * tell which version of a struct a caller filled (a size it does not know is refused). */
#ifndef K25_H_
#define K25_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define K25_ABI_VERSION 3

/* The K25_ABI_VERSION of the library; a program built against another one must not use it. */
int k25_abi_version(void);

typedef struct k25_engine k25_engine;

/* The kernel set k25 runs on this CPU ("avx512", "avx2", ...): the best one it has, or the one
 * the K25_ISA environment variable names; NULL when K25_ISA names a set this CPU cannot run
 * (*error says which feature is missing). k25_load fails the same way. */
const char* k25_kernel_isa(char** error);

typedef struct k25_engine_options {
  size_t struct_size; /* sizeof(k25_engine_options), set by k25_engine_options_init */
  int n_threads;      /* compute threads; <= 0: all cores */
  int max_batch_size; /* concurrent sequences; <= 0: 24 */
  int max_queue;      /* waiting requests before submit fails; < 0: 256 */
  int context_size;   /* tokens per sequence; <= 0: the model's context length */
  /* Further engine settings, "key=value" each, named and valued as in the server's
   * k25_config.yaml (docs/configuration.md), e.g. "flash_scheduler.kv_cache_dtype=f16",
   * "flash_scheduler.l3_device=/var/cache/k25.l3". Keys the engine does not have (the HTTP
   * server's own) are refused. Applied after the four fields above. */
  const char* const* settings;
  size_t n_settings;
} k25_engine_options;

/* Fills in the defaults above. */
void k25_engine_options_init(k25_engine_options* options);

/* Whether k25_load would accept one "key=value" setting: 0, or -1 with *error naming the key and
 * the problem ("setting <key>: ..."). Lets a program refuse a bad configuration before loading
 * a model. */
int k25_check_setting(const char* setting, char** error);

typedef struct k25_request {
  size_t struct_size;           /* sizeof(k25_request), set by k25_request_init */
  const char* prompt;           /* text to tokenise; or NULL with prompt_tokens */
  const int32_t* prompt_tokens; /* token ids (k25_tokenize), used when prompt is NULL */
  size_t n_prompt_tokens;
  int add_special;      /* text prompts: add BOS/EOS as the vocabulary asks (default 1) */
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
  int ignore_eos;          /* 1: generate max_tokens even past end-of-generation tokens */
  int top_logprobs;        /* < 0 (default): none; n >= 0: each token's logprob and the n most
                              likely alternatives (at most 20), in its TOKEN event */
  const char* session_id;  /* NULL: none; a conversation's id: its KV is kept in preference and
                              read back from L3 ahead of its next turn */
  const char* grammar;     /* NULL, or GBNF text (start rule `root`): the output follows it */
  const char* json_schema; /* NULL, or a JSON schema the output is a JSON value of (not both) */
  int repeat_last_n;       /* tokens repeat_penalty looks back over (default 64) */
  float presence_penalty;  /* OpenAI's, over the generated tokens (default 0: off) */
  float frequency_penalty; /* likewise (default 0: off) */
  const int32_t* logit_bias_tokens; /* added to these tokens' logits; -100 or less bans one */
  const float* logit_bias_values;
  size_t n_logit_bias;
  const int32_t* stop_tokens; /* tokens that end the output as end-of-generation tokens do */
  size_t n_stop_tokens;
  /* Flash (R-FP, R-PR): the hints the fingerprint reads beside the prompt. */
  int response_length;          /* the expected response length (x-response-length); <= 0: none */
  const char* fingerprint_text; /* the text the SimHash reads (a chat: the rendered conversation);
                                   NULL: the prompt text */
  int pruning;                  /* 1 (default): the engine's pruning settings decide the compute
                                   plan; 0: the full model */
  const char* speculative;      /* NULL (the engine's default), "off", "ngram", "self" or
                                   "auto" */
  const char* embedding;        /* NULL: generate; "mean", "cls" or "last": an embedding request
                                   (the FINISHED event carries the pooled, normalised vector) */
} k25_request;

/* Fills in the defaults above (prompt NULL, struct_size set). */
void k25_request_init(k25_request* request);

/* Why k25_submit refused a request (k25_submit_info.status). */
typedef enum k25_status {
  K25_OK = 0,
  K25_INVALID_REQUEST = 1, /* malformed, or does not fit the model (e.g. longer than the context) */
  K25_UNKNOWN_DOMAIN = 2,  /* domain_hint names no gate */
  K25_QUEUE_FULL = 3,      /* the queue is full: retry later */
  K25_SHUTTING_DOWN = 4,   /* the engine stops */
  K25_FAILED = 5           /* anything else */
} k25_status;

/* What k25_submit says about a request beside its id: why it was refused, or what Flash decided
 * for it (R-PR5). */
typedef struct k25_submit_info {
  size_t struct_size; /* sizeof(k25_submit_info), set by k25_submit_info_init */
  k25_status status;
  const char* domain;   /* the domain used (the hint or the SimHash match); the engine's storage */
  int flash_level;      /* 0: full model, 1: the rule, 2: the domain's gate */
  double compute_saved; /* the share of per-token compute the plan skips */
  char* plan;           /* "full" or e.g. "attn-off[3] ffn-off[4,5] heads-off[2:0,1]"; release with
                           k25_free_string (NULL when refused) */
  int prompt_tokens;    /* the prompt's length in tokens */
} k25_submit_info;

void k25_submit_info_init(k25_submit_info* info);

typedef enum k25_event_kind { K25_EVENT_TOKEN = 0, K25_EVENT_FINISHED = 1 } k25_event_kind;

typedef struct k25_event {
  k25_event_kind kind;
  int64_t request_id;
  int32_t token;    /* TOKEN: the sampled token */
  const char* text; /* text that became final (complete UTF-8, never part of a stop
                       string); on FINISHED the held-back rest. Not NUL-terminated
                       necessarily: use text_len. Valid during the callback only. */
  size_t text_len;
  /* TOKEN with top_logprobs >= 0: the token's log-probability and n_top alternatives (token
     ids and log-probabilities, most likely first); n_top 0 otherwise. Valid as text is. */
  int has_logprob; /* 1 when logprob (and the alternatives) are set */
  float logprob;
  int n_top;
  const int32_t* top_tokens;
  const float* top_logprobs;
  /* FINISHED only: */
  const char* finish_reason; /* "stop", "length", "cancelled" or "error" */
  const char* error;         /* "error": why; otherwise "" */
  int prompt_tokens;
  int cached_tokens; /* prompt tokens whose KV came from the prefix cache */
  int completion_tokens;
  double ttft_ms;
  double total_ms;
  const char* matched_stop; /* "stop" by a stop string: which one ("" otherwise) */
  int queue_timeout;        /* "error": 1 when it never started within the queue timeout */
  int cached_tokens_disk;   /* of cached_tokens, read back from the local disk tier (L3) */
  int cached_tokens_shared; /* of cached_tokens, read back from the shared (Redis) tier */
  int adaptive_decisions;   /* Level 3 decisions taken during decode */
  const char* final_plan;   /* the plan the last tokens ran under (as k25_submit_info.plan) */
  int drafted_tokens;       /* speculative decoding: draft tokens the model verified */
  int accepted_tokens;      /* and of those the ones it kept */
  const float* embedding;   /* embedding requests ("stop"): n_embedding floats of unit length */
  size_t n_embedding;
} k25_event;

/* Called on the engine's thread, in order, ending with one FINISHED event per request. Return
 * quickly and do not call k25 functions other than k25_cancel from it. */
typedef void (*k25_token_callback)(const k25_event* event, void* user_data);

/* Loads a GGUF file or Hugging Face directory and starts the engine. NULL on failure. */
k25_engine* k25_load(const char* model_path, const k25_engine_options* options, char** error);

/* Queues a request; returns its id (> 0), or 0 on failure (invalid request, prompt longer
 * than the context, queue full). With `callback` NULL the request's events are kept for
 * k25_next_event instead. `info` (may be NULL) receives the status and Flash's decision. */
int64_t k25_submit(k25_engine* engine, const k25_request* request, k25_token_callback callback,
                   void* user_data, k25_submit_info* info, char** error);

/* Prompt positions and tokens the engine has computed for the request so far (a caller can
 * tell a request that waits from one that progresses slowly); -1 for an unknown id. */
int64_t k25_progress(k25_engine* engine, int64_t request_id);

/* Requests queued or running. */
int k25_n_active(k25_engine* engine);

/* Cancels every request (each finishes with "cancelled"). */
void k25_cancel_all(k25_engine* engine);

/* Whether domain_hint `domain` names a gate of the loaded model ("default" always does). */
int k25_knows_domain(const k25_engine* engine, const char* domain);

/* Cancels a request; it finishes with finish_reason "cancelled". Unknown ids are ignored. */
void k25_cancel(k25_engine* engine, int64_t request_id);

/* Blocks until the request has finished (its FINISHED callback returned): 0; timeout_ms < 0
 * waits without limit; 1 on timeout; -1 for an id never returned by k25_submit, already waited
 * for, or finished more than 1024 requests ago (finished requests are forgotten then, so that
 * callers that never wait hold no memory). */
int k25_wait(k25_engine* engine, int64_t request_id, int timeout_ms);

/* Polling, for requests submitted without a callback: fills *event with the request's next
 * event, waiting up to timeout_ms (< 0: without limit): 0; 1 on timeout; -1 for an unknown id
 * or once its FINISHED event was returned (the request is then forgotten). The event's
 * pointers stay valid until the next k25_next_event call for that request (a FINISHED event's
 * until 1024 more requests have finished). A polled request is kept until its FINISHED event
 * is taken. */
int k25_next_event(k25_engine* engine, int64_t request_id, k25_event* event, int timeout_ms);

/* The model: vocabulary size and the engine's context (tokens per sequence). */
int k25_n_vocab(const k25_engine* engine);
int k25_context_size(const k25_engine* engine);

typedef struct k25_model_info {
  size_t struct_size;       /* sizeof(k25_model_info), set by the caller */
  const char* name;         /* the model's name (GGUF general.name); "" when it has none */
  const char* architecture; /* "llama", "qwen3", ... (strings: the engine's storage) */
  int n_vocab;
  int context_length; /* the context it was trained with */
  int dim;            /* embedding width */
  int n_layers;
  int n_heads;
  const char* pooling; /* how an embedding request pools by default: "mean", "cls" or "last" */
  const char* isa;     /* the kernel set chosen for this CPU: "avx512", "avx2", ... */
} k25_model_info;

/* Fills *info: 0, or -1 (engine NULL, or a struct_size this library does not know). */
int k25_get_model_info(const k25_engine* engine, k25_model_info* info);

/* Tokenises text (add_special: BOS/EOS as the vocabulary asks) into tokens[0..capacity) and
 * returns how many tokens the text has (more than capacity: call again with room for them), or
 * -1 on failure. */
int64_t k25_tokenize(const k25_engine* engine, const char* text, int add_special, int32_t* tokens,
                     size_t capacity, char** error);
/* The text of n tokens (special tokens rendered); NULL on failure (an id outside the
 * vocabulary). Release with k25_free_string(). */
char* k25_detokenize(const k25_engine* engine, const int32_t* tokens, size_t n, char** error);

/* Metrics in the Prometheus text format; release with k25_free_string(). */
char* k25_metrics(k25_engine* engine);

void k25_free_string(char* text);

/* Cancels whatever runs, stops the engine and releases the model. NULL is ignored. */
void k25_free(k25_engine* engine);

#ifdef __cplusplus
}
#endif

#endif /* K25_H_ */
