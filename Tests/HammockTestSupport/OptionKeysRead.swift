import Foundation
import Testing

/// The option keys a plugin's *Options.swift (a path from the package's root) reads through its
/// `OptionReader`, found in its text: what the plugin's options schema must describe, whatever its `known`
/// list says, so that a key read but not described (or described but never read) fails a test.
public func optionKeysRead(in file: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Set<String> {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
    let read = #/reader\.(?:string|bool|integer|duration|choice|stringList|stringMap|value|has)\("([^"]+)"/#
    let keys = Set(text.matches(of: read).map { String($0.output.1) })
    #expect(!keys.isEmpty, "no reader.…(\"key\") call found in \(file)", sourceLocation: sourceLocation)
    return keys
}
