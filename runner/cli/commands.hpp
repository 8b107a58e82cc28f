#pragma once
// The attnlab commands, one entry point each: the words after the command's name in, the exit
// status out. main.cpp dispatches on the name and includes nothing heavier than this.
#include <string>
#include <vector>

namespace attnlab {

using Args = std::vector<std::string>;

int cmd_env(const Args& args);  // cli/cmd_env.cpp: this build and machine
int cmd_serve(const Args& args);  // serve/cmd_serve.cpp: the database and the live queue in a browser
// serve/exec_serve.cpp: cmd_serve in attnlab-serve, the executable beside `self_exe` without LibTorch
int cmd_serve_apart(const Args& args, const std::string& self_exe);

// plugin_host/: finding, checking and creating plugins
int cmd_plugins(const Args& args);  // cmd_plugins.cpp
int cmd_check(const Args& args, const std::string& self_exe);  // cmd_check.cpp
int cmd_new(const Args& args);      // new_plugin.cpp

// experiment/ and queue/: experiment files, the queue and its processes
int cmd_data(const Args& args);                                        // experiment/cmd_data.cpp
int cmd_run(const Args& args, const std::string& self_exe);            // queue/cmd_run.cpp
int cmd_exec_job(const Args& args);                                    // queue/cmd_run.cpp (internal)
int cmd_queue(const Args& args);                                       // queue/cmd_queue.cpp
int cmd_worker(const Args& args, const std::string& self_exe);         // queue/cmd_worker.cpp
int cmd_worker_device(const Args& args, const std::string& self_exe);  // queue/cmd_worker.cpp (internal)
int cmd_bench_queue(const Args& args, const std::string& self_exe);    // queue/cmd_worker.cpp
int cmd_slurm(const Args& args, const std::string& self_exe);          // slurm/cmd_slurm.cpp

// cli/: the results database (the work is in results/ and store/)
int cmd_results(const Args& args);
int cmd_table(const Args& args);
int cmd_compare(const Args& args);
int cmd_curves(const Args& args);
int cmd_report(const Args& args);
int cmd_db(const Args& args);

// studies/: measurements beyond training
int cmd_approx(const Args& args);                             // cmd_approx.cpp
int cmd_bench(const Args& args, const std::string& self_exe);  // cmd_bench.cpp
int cmd_bench_one(const Args& args);                          // cmd_bench.cpp (internal)
int cmd_estimate(const Args& args);                           // cmd_estimate.cpp
int cmd_instability(const Args& args);                        // cmd_instability.cpp
int cmd_variance(const Args& args);                           // cmd_variance.cpp
int cmd_inspect(const Args& args);                            // cmd_inspect.cpp
int cmd_gradients(const Args& args);                          // cmd_gradients.cpp
int cmd_spectrum(const Args& args);                           // cmd_spectrum.cpp
int cmd_export(const Args& args);                             // cmd_export.cpp

}  // namespace attnlab
