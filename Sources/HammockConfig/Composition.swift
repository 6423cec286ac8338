import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockYAML

/// A configuration written once: files that include others (`include:`), and settings shared by sources
/// (`bases:`).

/// A base: source keys written once, for the sources that name it (`base: NAME`).
struct BaseDeclaration {
    var pairs: [YAMLPair]
    var place: Place
    var document: Int
}

/// One layer of a source's keys: a base's, or the source's own.
struct Layer {
    var pairs: [YAMLPair]
    /// Index into `ConfigurationReader.documents`.
    var document: Int
}

/// An id declared under `sources:` or `views:` in one of the files.
struct Declaration {
    var value: YAMLNode
    var place: Place
    var document: Int
    /// Declarations are read in the order of the files, then of the file.
    var order: Int
}

/// A source's options, layered: a base's, then the next base's, then the source's own. A mapping over a
/// mapping merges key by key, at any depth (a shell `env`, rest `headers` and `query`); anything else
/// replaces what was there, with every mark under it. A relative `url` joins the url below it, and a
/// relative `path` joins a directory `path` below it (see `joined`).
struct OptionLayers {
    var value = JSONObject()
    var marks: [JSONPointer: YAMLMark] = [:]
    var files: [JSONPointer: String] = [:]

    mutating func add(_ layer: JSONObject, marks layerMarks: [JSONPointer: YAMLMark], file: String) {
        value = merged(layer, at: JSONPointer(tokens: []), over: value, marks: layerMarks, file: file)
    }

    private mutating func merged(
        _ layer: JSONObject, at pointer: JSONPointer, over under: JSONObject, marks layerMarks: [JSONPointer: YAMLMark],
        file: String
    ) -> JSONObject {
        var object = under
        for (key, item) in layer {
            let member = pointer.appending(key)
            if case .object(let over) = item, case .object(let below)? = object[key] {
                object[key] = .object(merged(over, at: member, over: below, marks: layerMarks, file: file))
                if let mark = layerMarks[member] {
                    marks[member] = mark
                    files[member] = file
                }
                continue
            }
            object[key] = pointer.tokens.isEmpty ? Self.joined(key, item, over: object[key]) : item
            for stale in marks.keys where stale.tokens.starts(with: member.tokens) {
                marks[stale] = nil
                files[stale] = nil
            }
            for (written, mark) in layerMarks where written.tokens.starts(with: member.tokens) {
                marks[written] = mark
                files[written] = file
            }
        }
        return object
    }

    /// A source's relative `url` under a base's: the base's url is a prefix (an API's root, often with a
    /// path such as /api/v1), so the two are joined with exactly one `/` between them rather than resolved
    /// as RFC 3986 would (where `/repos` would drop the base's path). A url is relative when it has no
    /// scheme and does not start with a template (`{{ a.url }}` may give a whole URL). Likewise a relative
    /// file `path` (not starting with `/` or `~`) under a base's `path` that ends with `/`, which says the
    /// base's is a directory without asking the disk (a file that does not exist yet is watched all the
    /// same). Anything else replaces.
    static func joined(_ key: String, _ item: JSONValue, over under: JSONValue?) -> JSONValue {
        guard case .string(let relative) = item, case .string(let base)? = under else { return item }
        switch key {
        case "url":
            guard hasScheme(base), !hasScheme(relative), !relative.hasPrefix("{{") else { return item }
            if relative.isEmpty { return .string(base) }
            if relative.hasPrefix("?") || relative.hasPrefix("#") { return .string(base + relative) }
            let head = base.hasSuffix("/") ? String(base.dropLast()) : base
            let tail = relative.hasPrefix("/") ? String(relative.dropFirst()) : relative
            return .string(head + "/" + tail)
        case "path":
            guard base.hasSuffix("/"), !relative.hasPrefix("/"), !relative.hasPrefix("~") else { return item }
            return .string(base + relative)
        default:
            return item
        }
    }

    /// `scheme:` as RFC 3986 has it: a letter, then letters, digits, `+`, `-` or `.`.
    static func hasScheme(_ url: String) -> Bool {
        guard let colon = url.firstIndex(of: ":"), let first = url.first, first.isASCII, first.isLetter else { return false }
        return url[..<colon].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
    }
}

extension ConfigurationReader {
    // MARK: Files

    /// A file parsed; nil (and a problem at its first line) when it is not YAML.
    mutating func document(_ text: String, file: String, isMain: Bool) -> Document? {
        currentFile = file
        let root: YAMLNode?
        do {
            root = try YAML.parse(text)
        } catch {
            problem(error.mark, error.message)
            return nil
        }
        guard let root else {
            problem(
                YAMLMark(line: 1, column: 1),
                isMain ? "the configuration is empty; it needs at least `sources:`" : "the file is empty; an included file holds `sources:`, `views:` or `bases:`")
            return nil
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var document = Document(file: file, lines: lines, root: root, top: nil, isMain: isMain)
        enter(document)
        if let top = mapping(root, isMain ? "the configuration" : "an included file") {
            document = Document(file: file, lines: lines, root: root, top: top, isMain: isMain)
            if isMain {
                checkKeys(top, allowed: Self.topLevelKeys, context: "the configuration")
            } else {
                for pair in top {
                    guard let key = keyText(pair.key), !Self.includedFileKeys.contains(key) else { continue }
                    if ["version", "defaults", "plugins", "limits"].contains(key) {
                        problem(
                            pair.key.mark,
                            "`\(key):` belongs in the main file (\(mainFile)), where it applies to every file; an included file holds `sources:`, `views:`, `bases:` and `include:`")
                    } else {
                        problem(pair.key.mark, unknownKeyMessage(key, known: Self.includedFileKeys, context: "an included file"))
                    }
                }
            }
        }
        return document
    }

    /// How deep `include:` may nest: far more than a configuration needs, and a bound on the recursion.
    static let maximumIncludeDepth = 32

    /// Adds `document` and, depth first, every file it includes. `including` is the chain of files that led
    /// here, to report a cycle.
    mutating func collect(_ document: Document, including: [String]) {
        documents.append(document)
        if let canonical = including.last { documentsByCanonicalPath[canonical] = document.file }
        guard let node = document.top?.value("include") else { return }
        enter(document)
        let entries: [YAMLNode]
        if case .sequence(let items) = node.kind { entries = items } else if case .scalar = node.kind { entries = [node] } else {
            problem(node.mark, "include must be a file, a directory or a list of them, found \(node.kindName)")
            return
        }
        let directory = document.directory
        for entry in entries {
            enter(document)
            guard let written = string(entry, "an include") else { continue }
            guard !written.isEmpty else {
                problem(entry.mark, "include names no file; give a file or a directory, relative to this file")
                continue
            }
            let path = written.hasPrefix("/") ? written : directory + "/" + written
            var status = stat()
            guard stat(path, &status) == 0 else {
                problem(entry.mark, "include \"\(written)\": no such file or directory (\(path)); paths are relative to \(document.file)")
                continue
            }
            var paths = [path]
            if status.st_mode & S_IFMT == S_IFDIR {
                files.directories.append(path)
                // The conf.d habit: every *.yaml in it, by name, so 10-base.yaml comes before 20-extra.yaml.
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                paths = names.filter { $0.hasSuffix(".yaml") && !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
            }
            for file in paths {
                let canonical = canonicalPath(file)
                if let start = including.firstIndex(of: canonical) {
                    let cycle = (including[start...] + [canonical]).map { URL(fileURLWithPath: $0).lastPathComponent }
                    problem(entry.mark, "include cycle: \(cycle.joined(separator: " → ")); a file may not include itself, however indirectly")
                    continue
                }
                if let earlier = documentsByCanonicalPath[canonical] {
                    problem(entry.mark, "\(file) is already included (as \(earlier)); include each file once")
                    continue
                }
                guard including.count < Self.maximumIncludeDepth else {
                    problem(entry.mark, "include \"\(written)\": files include each other more than \(Self.maximumIncludeDepth) deep; include them from fewer levels")
                    continue
                }
                files.files.append(file)
                // A FIFO or a device would never end, or never answer.
                var info = stat()
                guard stat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                    problem(entry.mark, "include \"\(written)\": \(file) is not a regular file")
                    continue
                }
                // The limit on one file does not bound many: each is refused before it is read once the files
                // together would pass the limit.
                guard totalSize + Int(info.st_size) <= Self.maximumTotalSize else {
                    problem(
                        entry.mark,
                        "include \"\(written)\": \(file) is \(info.st_size) bytes, which would take the configuration's files past \(Self.maximumTotalSize >> 20) MiB together (\(totalSize) bytes so far); a configuration may be at most \(Self.maximumTotalSize >> 20) MiB, all its files together")
                    continue
                }
                switch ConfigurationLoader.readText(at: file) {
                case .failure(let failure):
                    problem(entry.mark, "include \"\(written)\": \(file): \(failure.message)")
                case .success(let text):
                    totalSize += text.utf8.count
                    if let included = self.document(text, file: file, isMain: false) {
                        collect(included, including: including + [canonical])
                    }
                }
                enter(document)
            }
        }
    }

    func canonicalPath(_ file: String) -> String {
        URL(fileURLWithPath: file).standardizedFileURL.resolvingSymlinksInPath().path
    }

    /// The ids declared under `section` in every file, each once: a second declaration is reported at both
    /// places, and the first stays.
    mutating func declarations(_ section: String, what: String) -> [String: Declaration] {
        var declared: [String: Declaration] = [:]
        var order = 0
        for (index, document) in documents.enumerated() {
            guard let node = document.top?.value(section) else { continue }
            enter(document)
            guard let pairs = mapping(node, section) else { continue }
            if pairs.isEmpty && section == "sources" {
                problem(node.mark, "`sources:` is empty; declare at least one source")
            }
            for pair in pairs {
                guard let id = keyText(pair.key) else { continue }
                // Views by the same rule as sources: an id goes into bar output, commands' environment
                // (HAMMOCK_VIEW) and log lines, where a NUL, an ESC or a newline would do harm.
                if !isValidIdentifier(id) {
                    problem(pair.key.mark, "\(what) id \"\(id)\" may hold only letters, digits, \"_\" and \"-\"")
                    continue
                }
                let here = place(pair.key.mark)
                if let first = declared[id] {
                    reportTwice(what, id, first: first.place, again: here)
                    continue
                }
                declared[id] = Declaration(value: pair.value, place: here, document: index, order: order)
                order += 1
            }
        }
        return declared
    }

    /// A duplicate id, at both places: either may be the one to rename or delete.
    mutating func reportTwice(_ what: String, _ id: String, first: Place, again: Place) {
        problem(at: again, "\(what) \"\(id)\" is declared twice; first at \(first.description)")
        problem(at: first, "\(what) \"\(id)\" is declared twice; again at \(again.description)")
    }

    // MARK: Bases

    /// Every file's `bases:`. A base is read only through the sources that use it: an unused base is fine.
    mutating func readBases() {
        for (index, document) in documents.enumerated() {
            guard let node = document.top?.value("bases") else { continue }
            enter(document)
            guard let pairs = mapping(node, "bases") else { continue }
            for pair in pairs {
                guard let id = keyText(pair.key) else { continue }
                guard isValidIdentifier(id) else {
                    problem(pair.key.mark, "base name \"\(id)\" may hold only letters, digits, \"_\" and \"-\"")
                    continue
                }
                let here = place(pair.key.mark)
                if let first = bases[id] {
                    reportTwice("base", id, first: first.place, again: here)
                    continue
                }
                guard let keys = mapping(pair.value, "base \"\(id)\"") else { continue }
                bases[id] = BaseDeclaration(pairs: keys, place: here, document: index)
            }
        }
    }

    /// The bases under a source, the farthest first: `base: NAME`, that base's own `base:`, and so on.
    /// nil when a name is unknown or the chain comes back to a base it passed (both reported).
    mutating func baseChain(from node: YAMLNode, of what: String) -> [Layer]? {
        // Built nearest first and reversed once, with a set for the cycle check: linear in the depth.
        var chain: [Layer] = []
        var names: [String] = []
        var passed = Set<String>()
        var nameNode = node
        while true {
            guard let name = string(nameNode, "base") else { return nil }
            guard let base = bases[name] else {
                let known = bases.keys.sorted()
                let hint = didYouMean(name, among: known)
                let list = known.isEmpty ? "no base is declared; declare it under `bases:`" : "bases: \(known.joined(separator: ", "))"
                problem(nameNode.mark, "\(what): unknown base \"\(name)\"\(hint); \(list)")
                return nil
            }
            if passed.contains(name) {
                problem(nameNode.mark, "base cycle: \((names + [name]).joined(separator: " → ")); a base may not be its own base, however indirectly")
                return nil
            }
            guard names.count < Self.maximumBaseDepth else {
                problem(
                    nameNode.mark,
                    "\(what): its bases stack more than \(Self.maximumBaseDepth) deep (\(names.prefix(3).joined(separator: " → ")) → … → \(names.last ?? "") → \(name)); a chain of bases may be at most \(Self.maximumBaseDepth) long")
                return nil
            }
            names.append(name)
            passed.insert(name)
            chain.append(Layer(pairs: base.pairs, document: base.document))
            guard let next = base.pairs.value("base") else { return chain.reversed() }
            enter(documents[base.document])
            nameNode = next
        }
    }
}
