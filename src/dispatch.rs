//! What each `gsv` command runs: the parsed command line handed to the library's
//! commands, on the runtime each needs (worker threads for the long-running ones, one
//! thread for a short exchange with the gateway).

use gsv::cli::{
    ApprovalsCommand, AuditCommand, Command, JobsCommand, NodeCommand, NodeServiceCommand,
    NodesCommand, TokenCommand, TokenRequest,
};
use gsv::commands;
use gsv::{exit, logging, resolve};

/// For the long-running commands (gateway, node, `up`, `mcp`, benchmarks): tokio's
/// worker threads, and the allocator's upkeep while the command runs.
fn run_async(default_log: &str, fut: impl std::future::Future<Output = u8>) -> u8 {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.on_thread_park(gsv::allocator::on_park);
    run_on(builder, default_log, async {
        let upkeep = tokio::spawn(gsv::allocator::maintain());
        let code = fut.await;
        upkeep.abort();
        code
    })
}

/// For the agent-side commands (`call`, `nodes`, `tools`, `approvals`): one short
/// exchange with the gateway, so one thread. No worker threads to start, and the
/// client's reader task and the command run on the same thread: an answer never has
/// to wake another thread to reach the command.
fn run_client(default_log: &str, fut: impl std::future::Future<Output = u8>) -> u8 {
    run_on(
        tokio::runtime::Builder::new_current_thread(),
        default_log,
        fut,
    )
}

fn run_on(
    mut builder: tokio::runtime::Builder,
    default_log: &str,
    fut: impl std::future::Future<Output = u8>,
) -> u8 {
    logging::init(default_log);
    match builder.enable_all().build() {
        Ok(rt) => rt.block_on(fut),
        Err(e) => {
            eprintln!("error: internal: cannot start the async runtime: {e}");
            exit::TOOL_ERROR
        }
    }
}

/// Runs `command`; its exit code.
pub fn run(command: Command) -> u8 {
    match command {
        Command::Up {
            gateway,
            node_id,
            workspace,
            echo_tool,
            confine,
            guards,
        } => {
            if let Err(e) = guards.validate() {
                eprintln!("error: invalid_args: {e}");
                return exit::USAGE;
            }
            run_async(
                "info",
                commands::up::run(commands::up::UpOptions {
                    gateway: gateway.config(),
                    node_id,
                    workspace,
                    echo_tool,
                    confine,
                    read_only: guards.read_only,
                    approve_shell: guards.approve_shell,
                    approve_exec: guards.approve_exec,
                    fetch_allow: guards.fetch_allow,
                    tools: guards.tools,
                    without: guards.without,
                    no_approval: guards.no_approval,
                    sessions_per_token: guards.sessions_per_token,
                    accept_login_profile: guards.accept_login_profile,
                }),
            )
        }
        Command::Gateway { gateway } => run_async("info", commands::gateway::run(gateway.config())),
        Command::Node(NodeCommand {
            service: Some(NodeServiceCommand::Install(args)),
            ..
        }) => run_async("warn", commands::node_service::install(*args)),
        Command::Node(NodeCommand {
            service: Some(NodeServiceCommand::Uninstall(args)),
            ..
        }) => {
            logging::init("warn");
            commands::node_service::uninstall(args)
        }
        Command::Node(NodeCommand { run: args, .. }) => match args.config() {
            Ok(config) => run_async("info", commands::node::run(config)),
            Err(e) => {
                eprintln!("{e}");
                exit::USAGE
            }
        },
        Command::Token { command } => match command {
            TokenCommand::Create(args) => {
                let dir = resolve::data_dir(args.data.data.as_deref());
                match args.request() {
                    Err(why) => {
                        eprintln!("error: invalid_args: {why}");
                        exit::USAGE
                    }
                    Ok(TokenRequest::Operator { name, role }) => {
                        commands::token::create_operator(&dir, &name, role)
                    }
                    Ok(TokenRequest::Node {
                        name,
                        labels,
                        install,
                    }) => commands::token::create_node(
                        &dir,
                        &name,
                        &labels,
                        install.as_ref().map(Option::as_deref),
                    ),
                    Ok(TokenRequest::Agent { name, spec }) => {
                        commands::token::create_agent(&dir, &name, spec)
                    }
                }
            }
            TokenCommand::List { data, json } => {
                commands::token::list(&resolve::data_dir(data.data.as_deref()), json)
            }
            TokenCommand::Revoke { id, data } => {
                commands::token::revoke(&resolve::data_dir(data.data.as_deref()), &id)
            }
        },
        Command::Call {
            target,
            json,
            timeout_ms,
            is_async: true,
            select: None,
            name,
            args,
            ..
        } => run_client(
            "warn",
            commands::jobs::call_async(target.target(), &name, &args, json, timeout_ms),
        ),
        Command::Call {
            target,
            json,
            timeout_ms,
            select: Some(select),
            batch,
            fail_fast,
            wait_offline,
            is_async,
            name,
            args,
        } => match commands::agent::fanout_args(
            &select,
            &name,
            &args,
            batch.as_deref(),
            wait_offline.as_deref(),
        ) {
            Ok((args, batch, wait_offline_ms)) => run_client(
                "warn",
                commands::fanout::run(
                    target.target(),
                    commands::fanout::FanoutArgs {
                        select: &select,
                        tool: &name,
                        args,
                        batch,
                        fail_fast,
                        json,
                        timeout_ms,
                        wait_offline_ms,
                        is_async,
                    },
                ),
            ),
            Err(code) => code,
        },
        Command::Call {
            target,
            json,
            timeout_ms,
            name,
            args,
            ..
        } => run_client(
            "warn",
            commands::agent::call(target.target(), &name, &args, json, timeout_ms),
        ),
        Command::Cp {
            target,
            json,
            recursive,
            retry_for,
            src,
            dst,
        } => run_client("warn", {
            gsv_transport::priority::lower_this_thread();
            commands::cp::run(
                target.target(),
                &src,
                &dst,
                recursive,
                json,
                std::time::Duration::from_secs(retry_for),
            )
        }),
        Command::Jobs {
            command:
                JobsCommand::List {
                    target,
                    json,
                    limit,
                    offset,
                    select,
                },
        } => run_client(
            "warn",
            commands::jobs::list(target.target(), json, limit, offset, select.as_deref()),
        ),
        Command::Jobs {
            command: JobsCommand::Show { id, target, json },
        } => run_client("warn", commands::jobs::show(target.target(), &id, json)),
        Command::Jobs {
            command: JobsCommand::Cancel { id, target, json },
        } => run_client("warn", commands::jobs::cancel(target.target(), &id, json)),
        Command::Nodes {
            command,
            target,
            json,
            select,
        } => match command {
            None => run_client(
                "warn",
                commands::agent::nodes(target.target(), json, select.as_deref()),
            ),
            Some(NodesCommand::Label {
                id,
                labels,
                remove,
                target,
                json,
            }) => run_client(
                "warn",
                commands::nodes::label(target.target(), &id, &labels, &remove, json),
            ),
            Some(NodesCommand::Show { id, target, json }) => {
                run_client("warn", commands::nodes::show(target.target(), &id, json))
            }
            Some(NodesCommand::AcceptTools { id, target, json }) => run_client(
                "warn",
                commands::nodes::accept_tools(target.target(), &id, json),
            ),
        },
        Command::Tools { target, json } => {
            run_client("warn", commands::agent::tools(target.target(), json))
        }
        Command::Mcp {
            target,
            view,
            select,
        } => run_async(
            "warn",
            commands::mcp::run(target.target(), view.map(|v| v.view()), select),
        ),
        Command::Approvals { command } => match command {
            ApprovalsCommand::List {
                target,
                all,
                json,
                limit,
                offset,
            } => run_client(
                "warn",
                commands::approvals::list(
                    target.target(),
                    gsv_gateway::approvals::ListQuery { all, limit, offset },
                    json,
                ),
            ),
            ApprovalsCommand::Approve { id, target } => run_client(
                "warn",
                commands::approvals::decide(target.target(), &id, true),
            ),
            ApprovalsCommand::Deny { id, target } => run_client(
                "warn",
                commands::approvals::decide(target.target(), &id, false),
            ),
        },
        Command::Ui { target, open } => {
            run_client("warn", commands::ui::run(target.target(), open))
        }
        Command::Audit { command } => match command {
            AuditCommand::Verify { data, json } => {
                commands::audit::verify(&resolve::data_dir(data.data.as_deref()), json)
            }
            AuditCommand::Tail {
                data,
                lines,
                follow,
                json,
            } => run_async(
                "warn",
                commands::audit::tail(
                    &resolve::data_dir(data.data.as_deref()),
                    lines,
                    follow,
                    json,
                ),
            ),
        },
        Command::Bench(args) => run_async("warn", bench(args)),
    }
}

/// `gsv bench`: the scenarios are the gsv-bench crate's; the agent client they time is
/// `gsv call`'s own (`gsv-client`).
async fn bench(args: gsv_bench::cli::BenchArgs) -> u8 {
    match gsv_bench::cli::run(args).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: bench: {e}");
            match e {
                gsv_bench::cli::Error::Usage(_) => exit::USAGE,
                gsv_bench::cli::Error::Failed(_) => exit::TOOL_ERROR,
            }
        }
    }
}
