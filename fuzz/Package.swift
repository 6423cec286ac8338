// swift-tools-version: 6.0
import PackageDescription

// libFuzzer targets for hammock's parsers. A separate package so that the main build and `swift test`
// never need `-sanitize=fuzzer`. Build and run with `fuzz/run` (see README.md), which builds with
// SwiftPM's `--sanitize=fuzzer` (plus `address`); a plain `swift build` here fails to link, and
// `-Xswiftc -sanitize=fuzzer` alone links a do-nothing binary, because SwiftPM then aliases `main` to
// the target's Swift entry point instead of leaving it to libFuzzer.
// Each target is one file holding only `LLVMFuzzerTestOneInput`; parsed as a library, it emits no
// Swift `main`, so the `main` that libFuzzer links in drives it.
let libFuzzerEntryPoint: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "hammock-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "hammock", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "FuzzYAML", dependencies: [.product(name: "HammockYAML", package: "hammock")],
            swiftSettings: libFuzzerEntryPoint
        ),
        .executableTarget(
            name: "FuzzConfig",
            dependencies: [
                .product(name: "HammockConfig", package: "hammock"),
                .product(name: "HammockCore", package: "hammock"),
            ],
            swiftSettings: libFuzzerEntryPoint
        ),
        .executableTarget(
            name: "FuzzPluginLine",
            dependencies: [
                .product(name: "HammockProtocol", package: "hammock"),
                .product(name: "HammockJSON", package: "hammock"),
            ],
            swiftSettings: libFuzzerEntryPoint
        ),
        .executableTarget(
            name: "FuzzControlLine", dependencies: [.product(name: "HammockCore", package: "hammock")],
            swiftSettings: libFuzzerEntryPoint
        ),
        .executableTarget(
            name: "FuzzJSON", dependencies: [.product(name: "HammockJSON", package: "hammock")],
            swiftSettings: libFuzzerEntryPoint
        ),
    ],
    swiftLanguageModes: [.v6]
)
