// pi's RpcClient starts `node <cliPath> --mode rpc ...`; with this file as cliPath it
// starts tempi (as `$TEMPI_PYTHON -m tempi ...`) on the same pipes instead.
import { spawn } from "node:child_process";

const child = spawn(process.env.TEMPI_PYTHON, ["-m", "tempi", ...process.argv.slice(2)], { stdio: "inherit" });
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => process.exit(code ?? 1));
