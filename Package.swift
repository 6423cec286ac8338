// swift-tools-version: 6.1
import PackageDescription

// Module map (each line: what it holds, what it may touch). Features that a run may go without are modules
// of their own that the `hammock` executable links, as Hummingbird's are: the engine defines the protocol
// a feature plugs into (`EngineObserver` for --metrics) and imports none of the feature's packages.
//   HammockJSON      JSON values that keep key order and number text, parser, writer, pointers, and Codable
//                    coders over JSONValue. Pure.
//   HammockYAML      YAML → positioned node tree, over the system's libyaml (CYAML).
//   HammockCore      source state machine, load phases, freshness, views, output and control lines, option
//                    templates and template rules, parsed render templates (configuration, not rendering),
//                    and EngineCore, which takes inputs with the time and returns actions. Pure, no I/O.
//   HammockRendering turning state into text: render templates evaluated (filters, RenderContext), a view's
//                    RenderedBlock, the bar encoders (StdoutFormat, BarEncoder), hammock watch's screen and
//                    keys. Over HammockCore, which renders nothing. Pure.
//   HammockConfig    YAML configuration → validated Configuration, with file:line:column diagnostics.
//   HammockSystem    blocking I/O on Linux, one way each: threads of their own, the condition a thread sleeps
//                    on, the line reader and splitter, the write-everything loop, signals, /proc, processes
//                    (ChildProcess: the one way engine, plugins and client start one), the inotify
//                    FileWatcher (hammock's --watch-config and the file plugin). Glibc and CHammockSystem only,
//                    so the client builds on it with the traits off.
//   HammockProtocol  the engine ↔ plugin messages as Codable types (PluginProtocol.swift; the hot `load` and
//                    `newData` lines hand-written beside them, pinned by tests).
//   HammockLogging   hammock's stderr, shared by the engine, the plugin host and the CLI: the bounded
//                    StandardError writer, swift-log's handler over it (LogFormat), and the Secrets that
//                    everything that writes redacts. Over HammockCore's Redactor and HammockSystem's writes.
//   HammockPluginHost  the plugin host and its transports: PluginHost (an actor carrying out the pure
//                    PluginSupervisor), PluginTransport over a process below hammock's guard
//                    (ProcessTransport, started by HammockSystem's ChildProcess) or in-process
//                    (InProcessTransport, for BuiltInPlugins such as HammockFakePlugin), the guard, the
//                    resolver, the orphan reaper, PluginHello and PluginSession. It tells the engine what
//                    happened as a PluginHostEvent and knows nothing of reloads or the engine's inputs.
//   HammockEngine    the loop and its edges, as child tasks of one run: stdout writer and stdin reader over
//                    transports, signals, the clock, the offline cache, click commands, systemd's notify
//                    socket, the watch terminal, the reload state machine; a PluginHost per kind, whose
//                    events it wraps into its inputs. EngineObserver: what a feature such as --metrics is told.
//   HammockConformance  `hammock plugin check`: PluginConformance drives any plugin through the protocol
//                    over HammockPluginHost's PluginSession. A feature module: only `hammock` links it.
//   HammockMetrics   --metrics: swift-metrics instruments over a Prometheus registry (EngineMetrics, an
//                    EngineObserver), the per-source series, and the HTTP server over SwiftNIO (MetricsServer).
//   HammockPluginKit a small library that makes a plugin in Swift a handful of lines.
//   HammockClient    the consumer's side: runs `hammock run` (or attaches to its pipes), keeps the latest
//                    state of each source and view, decodes content into the app's types, acknowledged
//                    control. Uses HammockCore's view rules for client-side groups; no I/O of the engine's.
//   hammock          the command-line interface (swift-argument-parser): links the engine and its features
//                    (HammockMetrics, HammockConformance).
//   hammock-guard    the process each plugin runs below, which no process it started outlives. C, libc alone.
//   hammock-relay    what `hammock attach` execs once connected: copies the connection to stdout and stdin to
//                    it, for as long as a bar runs. C, libc alone.
//   hammock-dashboard  Examples/Dashboard: a page of code over HammockClient alone.
//   plugins/<kind>/  each shipped plugin in its own folder: Library/ (HammockShellPlugin, HammockFilePlugin,
//                    HammockRESTPlugin: the plugin's logic, over HammockPluginKit, tested in-process) and
//                    Executable/ (hammock-plugin-<kind>: a main.swift of a few lines that runs it).
//                    plugins/fake/ has only Library/ (HammockFakePlugin): hammock runs it inside its own process.
//   CYAML, CHammockSystem  C: libyaml's headers; epoll, spawning, reaping and subreaping, thread names, the
//                    terminal's size, for HammockSystem and the engine.
//   HammockTestSupport (Tests/) the one harness for tests that start a built executable: HammockProcess,
//                    /proc helpers, test files, RunSlots. hammock-client-probe (Tests/): an app over
//                    HammockClient alone, for ClientSignalTests.

// The trait `Engine` (on by default) gates every package that only the engine, its plugins and its tests use.
// HammockClient needs swift-collections alone, so an app that depends on hammock for the client turns the
// traits off and resolves nothing else (docs/client-swift.md):
//     .package(url: "https://github.com/…/hammock", from: "0.1.0", traits: [])
// Each product of those packages carries `condition: engine`; SwiftPM leaves a package out of the resolution
// when every use of it is behind a disabled trait (tests/consumers/swift-package counts what resolves).
let engine: TargetDependencyCondition? = .when(traits: ["Engine"])

let package = Package(
    name: "hammock",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hammock", targets: ["hammock"]),
        .executable(name: "hammock-guard", targets: ["hammock-guard"]),
        .executable(name: "hammock-relay", targets: ["hammock-relay"]),
        .executable(name: "hammock-mcp", targets: ["hammock-mcp"]),
        .executable(name: "hammock-plugin-shell", targets: ["hammock-plugin-shell"]),
        .executable(name: "hammock-plugin-file", targets: ["hammock-plugin-file"]),
        .executable(name: "hammock-plugin-rest", targets: ["hammock-plugin-rest"]),
        .library(name: "HammockPluginKit", targets: ["HammockPluginKit"]),
        // For apps that run hammock and consume its lines: typed sources and views, acknowledged control.
        .library(name: "HammockClient", targets: ["HammockClient"]),
        // Exported for the fuzz package in fuzz/ (built separately, see fuzz/README.md).
        .library(name: "HammockYAML", targets: ["HammockYAML"]),
        .library(name: "HammockJSON", targets: ["HammockJSON"]),
        .library(name: "HammockCore", targets: ["HammockCore"]),
        .library(name: "HammockConfig", targets: ["HammockConfig"]),
        .library(name: "HammockProtocol", targets: ["HammockProtocol"]),
    ],
    traits: [
        .trait(name: "Engine", description: "The engine, its plugins and their tests (off: HammockClient alone)."),
        .default(enabledTraits: ["Engine"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.65.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.24.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/modelcontextprotocol/swift-sdk", from: "0.12.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        .target(name: "HammockYAML", dependencies: ["CYAML"]),
        .target(name: "CHammockSystem"),
        // The process every plugin runs below (see its main.c): C with libc alone, installed beside hammock.
        // Debug builds get the tests' seam (HAMMOCK_TEST_GUARD_STOP_AT); a release build has none.
        .executableTarget(
            name: "hammock-guard",
            cSettings: [.define("HAMMOCK_TEST_SEAMS", .when(configuration: .debug))]
        ),
        // What `hammock attach` becomes once connected (see its main.c): C with libc alone, installed beside hammock.
        .executableTarget(name: "hammock-relay"),
        .target(
            name: "HammockJSON",
            dependencies: [.product(name: "OrderedCollections", package: "swift-collections")]
        ),
        .target(
            name: "HammockCore",
            dependencies: [
                "HammockJSON",
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // Turning state into text: templates rendered, bar encoders, the watch screen. Above the core, which
        // holds the parsed templates (configuration) and renders nothing.
        .target(
            name: "HammockRendering",
            dependencies: [
                "HammockCore", "HammockJSON", .product(name: "OrderedCollections", package: "swift-collections"),
            ]
        ),
        .target(name: "HammockConfig", dependencies: ["HammockCore", "HammockJSON", "HammockYAML"]),
        .target(name: "HammockSystem", dependencies: ["CHammockSystem"]),
        .target(name: "HammockProtocol", dependencies: ["HammockCore", "HammockJSON"]),
        .target(
            name: "HammockPluginKit",
            dependencies: [
                "HammockProtocol", "HammockSystem", "HammockCore", "HammockJSON", "HammockYAML", "CHammockSystem",
                .product(name: "OrderedCollections", package: "swift-collections"),
            ]
        ),
        // hammock's stderr and the secrets it redacts, for the engine, the plugin host and the CLI alike.
        .target(
            name: "HammockLogging",
            dependencies: [
                "HammockCore", "HammockJSON", "HammockSystem",
                .product(name: "Logging", package: "swift-log", condition: engine),
            ]
        ),
        // The plugin host and its transports; it reports to the engine through PluginHostEvent.
        .target(
            name: "HammockPluginHost",
            dependencies: [
                "HammockCore", "HammockJSON", "HammockProtocol", "HammockSystem", "HammockLogging", "CHammockSystem",
                // The built-in kinds (BuiltInPlugins) are HammockPluginKit plugins served in process.
                "HammockPluginKit", "HammockFakePlugin",
                .product(name: "Logging", package: "swift-log", condition: engine),
            ]
        ),
        .target(
            name: "HammockEngine",
            dependencies: [
                "HammockCore", "HammockRendering", "HammockConfig", "HammockProtocol", "HammockSystem", "HammockJSON",
                "CHammockSystem", "HammockLogging", "HammockPluginHost",
                .product(name: "Logging", package: "swift-log", condition: engine),
            ]
        ),
        // `hammock plugin check`, a feature the engine does not link: the conformance run over the host's
        // PluginSession.
        .target(
            name: "HammockConformance",
            dependencies: ["HammockPluginHost", "HammockCore", "HammockJSON", "HammockProtocol", "HammockSystem"]
        ),
        // A small HTTP/1.1 server over NIO, with its bounds on clients: what --metrics and --http serve.
        .target(
            name: "HammockHTTP",
            dependencies: [
                "HammockCore", "HammockJSON",
                .product(name: "NIOCore", package: "swift-nio", condition: engine),
                .product(name: "NIOPosix", package: "swift-nio", condition: engine),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: engine),
            ]
        ),
        // --metrics, a feature the engine knows only as an `EngineObserver`: swift-metrics instruments over a
        // Prometheus registry, served by HammockHTTP.
        .target(
            name: "HammockMetrics",
            dependencies: [
                "HammockEngine", "HammockCore", "HammockHTTP",
                .product(name: "CoreMetrics", package: "swift-metrics", condition: engine),
                .product(name: "Prometheus", package: "swift-prometheus", condition: engine),
            ]
        ),
        .target(name: "HammockClient", dependencies: ["HammockCore", "HammockJSON", "HammockProtocol", "HammockSystem"]),
        .executableTarget(
            name: "hammock",
            dependencies: [
                "HammockEngine", "HammockMetrics", "HammockHTTP", "HammockConformance", "HammockPluginHost", "HammockLogging",
                "HammockRendering", "HammockConfig", "HammockCore", "HammockJSON", "HammockProtocol", "HammockSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: engine),
                .product(name: "Logging", package: "swift-log", condition: engine),
            ]
        ),
        // `hammock mcp`: a Model Context Protocol server over the shared engine (docs/mcp.md), a program of its
        // own because the MCP SDK needs Foundation, which the hammock binary keeps out.
        .executableTarget(
            name: "hammock-mcp",
            dependencies: [
                "HammockClient", "HammockConfig", "HammockCore", "HammockJSON",
                .product(name: "MCP", package: "swift-sdk", condition: engine),
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: engine),
            ]
        ),
        // A page of code over HammockClient: configs/demo.yaml as a terminal dashboard (docs/client-swift.md).
        .executableTarget(name: "hammock-dashboard", dependencies: ["HammockClient"], path: "Examples/Dashboard"),
        // Each shipped plugin is a library holding its logic, tested in-process, and a thin executable.
        .target(
            name: "HammockShellPlugin",
            dependencies: [
                "HammockPluginKit", "HammockCore", "HammockJSON", "HammockYAML", "HammockProtocol", "HammockSystem",
                "CHammockSystem",
            ],
            path: "plugins/shell/Library"
        ),
        .executableTarget(
            name: "hammock-plugin-shell",
            dependencies: ["HammockShellPlugin", "HammockPluginKit"],
            path: "plugins/shell/Executable"
        ),
        .target(
            name: "HammockFilePlugin",
            dependencies: ["HammockPluginKit", "HammockCore", "HammockJSON", "HammockYAML", "HammockProtocol", "HammockSystem"],
            path: "plugins/file/Library"
        ),
        .executableTarget(
            name: "hammock-plugin-file",
            dependencies: ["HammockFilePlugin", "HammockPluginKit"],
            path: "plugins/file/Executable"
        ),
        .target(
            name: "HammockFakePlugin",
            dependencies: ["HammockPluginKit", "HammockCore", "HammockJSON"],
            path: "plugins/fake/Library"
        ),
        .target(
            name: "HammockRESTPlugin",
            dependencies: [
                "HammockPluginKit", "HammockCore", "HammockJSON", "HammockSystem",
                .product(name: "NIOCore", package: "swift-nio", condition: engine),
                .product(name: "NIOPosix", package: "swift-nio", condition: engine),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: engine),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: engine),
                .product(name: "NIOTLS", package: "swift-nio", condition: engine),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras", condition: engine),
            ],
            path: "plugins/rest/Library"
        ),
        .executableTarget(
            name: "hammock-plugin-rest",
            dependencies: ["HammockRESTPlugin", "HammockPluginKit"],
            path: "plugins/rest/Executable"
        ),
        // The system layer against the real kernel: pipes, signals, /proc.
        .testTarget(name: "HammockSystemTests", dependencies: ["HammockSystem", "HammockTestSupport"]),
        .testTarget(name: "HammockYAMLTests", dependencies: ["HammockYAML"]),
        .testTarget(name: "HammockJSONTests", dependencies: ["HammockJSON"]),
        .testTarget(name: "HammockCoreTests", dependencies: ["HammockCore", "HammockRendering", "HammockJSON", "HammockTestSupport"]),
        .testTarget(name: "HammockConfigTests", dependencies: ["HammockConfig", "HammockCore", "HammockRendering", "HammockJSON", "HammockTestSupport"]),
        // The one process harness (HammockProcess), /proc helpers (over HammockSystem's ProcessStat) and test
        // files, for every test target that starts a built executable.
        .target(name: "HammockTestSupport", dependencies: ["HammockJSON", "HammockSystem"], path: "Tests/HammockTestSupport"),
        .testTarget(
            name: "HammockPluginTests",
            dependencies: ["HammockTestSupport", "HammockJSON", "HammockProtocol", "HammockCore"]
        ),
        // In-process tests of each plugin's logic and of the kit; HammockPluginTests drives the executables.
        .testTarget(name: "HammockPluginKitTests", dependencies: ["HammockPluginKit", "HammockProtocol", "HammockCore", "HammockJSON", "HammockYAML"]),
        .testTarget(
            name: "HammockShellPluginTests",
            dependencies: [
                "HammockShellPlugin", "HammockPluginKit", "HammockProtocol", "HammockSystem", "HammockCore", "HammockJSON",
                "HammockTestSupport",
            ]
        ),
        .testTarget(
            name: "HammockFilePluginTests",
            dependencies: [
                "HammockFilePlugin", "HammockPluginKit", "HammockCore", "HammockJSON", "HammockProtocol", "HammockSystem",
                "HammockTestSupport",
            ]
        ),
        .testTarget(
            name: "HammockFakePluginTests",
            dependencies: ["HammockFakePlugin", "HammockPluginKit", "HammockCore", "HammockJSON", "HammockTestSupport"]
        ),
        .testTarget(
            name: "HammockRESTPluginTests",
            dependencies: [
                "HammockRESTPlugin", "HammockPluginKit", "HammockCore", "HammockJSON", "HammockTestSupport",
                .product(name: "NIOCore", package: "swift-nio", condition: engine),
                .product(name: "NIOPosix", package: "swift-nio", condition: engine),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: engine),
            ]
        ),
        // The engine's edges in memory: stdout's writer and stdin's control lines over in-memory transports,
        // the plugin host (HammockPluginHost) over an in-memory plugin and a manual clock, hammock's stderr
        // (HammockLogging).
        .testTarget(
            name: "HammockEngineTests",
            dependencies: [
                "HammockEngine", "HammockPluginHost", "HammockLogging", "HammockConfig", "HammockCore", "HammockJSON",
                "HammockProtocol", "HammockRendering", "HammockSystem", "HammockTestSupport",
                // EmbeddedEngine's test plugins are HammockPluginKit plugins, as the built-in fake is.
                "HammockPluginKit",
                .product(name: "Logging", package: "swift-log", condition: engine),
            ]
        ),
        // --metrics' own parts: its address, the server's limits, the per-source table.
        .testTarget(name: "HammockMetricsTests", dependencies: ["HammockMetrics", "HammockHTTP", "HammockEngine"]),
        .testTarget(
            name: "HammockEndToEndTests",
            dependencies: ["HammockTestSupport", "HammockJSON"]
        ),
        .testTarget(
            name: "HammockRESTTests",
            dependencies: [
                "HammockTestSupport", "HammockJSON",
                .product(name: "NIOCore", package: "swift-nio", condition: engine),
                .product(name: "NIOPosix", package: "swift-nio", condition: engine),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: engine),
            ]
        ),
        .testTarget(
            name: "HammockClientTests",
            dependencies: ["HammockClient", "HammockCore", "HammockJSON", "HammockSystem", "HammockTestSupport"]
        ),
        // A small app over HammockClient alone, run by HammockClientTests (ClientSignalTests): what a broken pipe
        // does to an app shows only in a process where nothing else (SwiftNIO) has ignored SIGPIPE.
        .executableTarget(name: "hammock-client-probe", dependencies: ["HammockClient"], path: "Tests/HammockClientProbe"),
    ],
    swiftLanguageModes: [.v6]
)
