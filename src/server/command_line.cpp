#include "server/command_line.h"

#include <CLI/CLI.hpp>
#include <map>

namespace k25 {

CommandLine parse_server_command_line(int argc, const char* const* argv) {
  CommandLine out;
  CLI::App app("k25-server: an LLM inference server with the Flash scheduling layer");
  std::string config_path;
  app.add_option("--config", config_path, "YAML configuration file (k25_config.yaml)");
  // Every configuration key as a flag, taken as text and applied through the same validation
  // as the file, after the file.
  std::map<std::string, std::string> overrides;
  std::vector<std::pair<std::string, CLI::Option*>> flags;
  for (const ConfigKey& key : config_keys()) {
    CLI::Option* option =
        app.add_option(key.flag, overrides[key.path], key.help + " [" + key.path + "]");
    flags.emplace_back(key.path, option);
  }
  for (const RemovedConfigKey& key : removed_config_keys()) {
    // Not in --help (group ""); given, it fails below with the key's own message.
    flags.emplace_back(key.path, app.add_option(key.flag, overrides[key.path])->group(""));
  }
  bool disable_adaptive_pruning = false;
  app.add_flag("--disable-adaptive-pruning", disable_adaptive_pruning,
               "turn Level 3 adaptive pruning off (outputs then repeat exactly)");
  std::string api_key;
  app.add_option("--api-key", api_key,
                 "require 'Authorization: Bearer KEY' (prefer api_server.api_key_file)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.exit_code = 0;
    out.output = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    out.exit_code = 2;
    out.output = std::string("error: ") + e.what() + "\n(run with --help for the flags)\n";
    return out;
  }
  if (!config_path.empty()) apply_config_file(out.config, config_path);
  for (const auto& [path, option] : flags) {
    if (option->count() > 0) set_config_value(out.config, path, overrides[path]);
  }
  if (disable_adaptive_pruning) out.config.adaptive_pruning = false;
  if (!api_key.empty()) out.config.api_key = api_key;
  load_api_key(out.config);
  load_redis_password(out.config);
  if (!api_key.empty()) out.config.api_key = api_key;  // the flag wins over the file
  load_warmup_file(out.config);
  load_chat_template(out.config);
  return out;
}

}  // namespace k25
