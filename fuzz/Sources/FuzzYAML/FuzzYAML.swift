#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HammockYAML

// Any text either parses into a node tree or throws a YAMLError whose mark points into the text;
// nothing may crash, hang or exhaust memory (alias bombs and deep nesting are bounded by the loader).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        if let root = try YAML.parse(text) {
            walk(root)
        }
    } catch {
        check(error, in: text)
    }
    return 0
}

/// Touches every node (iteratively) so that resolution and accessors run on fuzzed trees too.
private func walk(_ root: YAMLNode) {
    var pending = [root]
    var visited = 0
    while let node = pending.popLast() {
        visited += 1
        require(node.mark.line >= 1 && node.mark.column >= 1, "node mark \(node.mark) out of range")
        switch node.kind {
        case .scalar(let scalar):
            _ = scalar.resolved
        case .sequence(let items):
            pending.append(contentsOf: items)
        case .mapping(let pairs):
            for pair in pairs {
                pending.append(pair.key)
                pending.append(pair.value)
            }
        }
        // The loader caps alias expansion at a million nodes; walking far beyond that would mean the cap leaks.
        require(visited <= 2_000_000, "alias expansion exceeded the loader's limit")
    }
}

private func check(_ error: YAMLError, in text: String) {
    let lines = yamlLineCount(text)
    require(error.mark.line >= 1 && error.mark.line <= lines, "error mark \(error.mark) outside the text (\(lines) lines): \(error.message)")
    require(error.mark.column >= 1, "error mark \(error.mark) has no column: \(error.message)")
    require(!error.message.isEmpty, "empty error message")
}

// Checks that say what failed: precondition messages are dropped in release builds.
private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    let line = Array("fuzz check failed: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    abort()
}

/// Lines as libyaml counts them: LF, CR, CRLF, NEL, LS and PS each end one.
private func yamlLineCount(_ text: String) -> Int {
    var lines = 1
    var previous: Unicode.Scalar = "\0"
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n" where previous == "\r": break
        case "\n", "\r", "\u{85}", "\u{2028}", "\u{2029}": lines += 1
        default: break
        }
        previous = scalar
    }
    return lines
}
