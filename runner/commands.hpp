#pragma once
// The attnlab subcommands. Each takes the arguments after its name and returns the exit status.
#include <string>
#include <vector>

namespace attnlab {

using Args = std::vector<std::string>;

int cmd_plugins(const Args& args);
int cmd_check(const Args& args);  // conformance.cpp: the conformance suite on one attention plugin
int cmd_run(const Args& args, const std::string& self_exe);
int cmd_results(const Args& args);  // cmd_results.cpp
int cmd_exec_job(const Args& args);
int cmd_instability(const Args& args);  // instability_cmd.cpp
int cmd_data(const Args& args);         // cmd_data.cpp
int cmd_variance(const Args& args);     // cmd_variance.cpp
int cmd_inspect(const Args& args);      // cmd_inspect.cpp
int cmd_queue(const Args& args);        // cmd_queue.cpp
int cmd_db(const Args& args);           // cmd_db.cpp
int cmd_worker(const Args& args, const std::string& self_exe);         // cmd_worker.cpp
int cmd_worker_device(const Args& args, const std::string& self_exe);  // cmd_worker.cpp (internal)
int cmd_bench_queue(const Args& args, const std::string& self_exe);    // cmd_worker.cpp
int cmd_slurm(const Args& args, const std::string& self_exe);  // cmd_slurm.cpp
int cmd_table(const Args& args);    // cmd_table.cpp
int cmd_compare(const Args& args);  // cmd_compare.cpp
int cmd_curves(const Args& args);   // cmd_curves.cpp
int cmd_report(const Args& args);   // cmd_report.cpp

}  // namespace attnlab
