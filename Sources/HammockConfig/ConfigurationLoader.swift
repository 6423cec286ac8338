import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockYAML

/// A configuration together with where each of its parts was written, so that problems found later (by a
/// plugin validating its own options, say) can still be reported as `file:line:column`.
public struct LoadedConfiguration: Sendable {
    public var configuration: Configuration
    /// The main file.
    public var file: String
    /// By source id.
    public var positions: [SourceID: OptionPositions]
    /// Every file (and included directory) the configuration was read from: what `--watch-config` watches.
    public var files: ConfigurationFiles

    public init(
        configuration: Configuration, file: String, positions: [SourceID: OptionPositions] = [:],
        files: ConfigurationFiles? = nil
    ) {
        self.configuration = configuration
        self.file = file
        self.positions = positions
        self.files = files ?? ConfigurationFiles(files: [file])
    }

    /// Turns a plugin's complaint about a source's options into a diagnostic at the right place: in the
    /// source, or in the base the option came from.
    public func diagnostic(source: SourceID, problem: OptionProblem) -> Diagnostic {
        let message = "source \"\(source)\": \(problem.message)"
        guard let positions = positions[source] else { return Diagnostic(YAMLMark(line: 1, column: 1), message) }
        let place = positions.place(for: problem.pointer)
        return Diagnostic(place.mark, message, file: place.file ?? file)
    }
}

/// Where a source's options stand in the files.
public struct OptionPositions: Sendable {
    /// The source's own key (`repo:`).
    public var source: YAMLMark
    /// Object members by the mark of their key; array elements by their own mark.
    public var marks: [JSONPointer: YAMLMark]
    /// The file the source is declared in (nil: the main file).
    public var file: String?
    /// The file of each mark in `marks` that is not in `file`: an option that came from a base declared in
    /// another file.
    public var files: [JSONPointer: String]

    public init(source: YAMLMark, marks: [JSONPointer: YAMLMark], file: String? = nil, files: [JSONPointer: String] = [:]) {
        self.source = source
        self.marks = marks
        self.file = file
        self.files = files
    }

    /// The mark of `pointer`, or of its nearest ancestor that was written in the file.
    public func mark(for pointer: JSONPointer) -> YAMLMark { place(for: pointer).mark }

    /// The file and mark of `pointer`, or of its nearest ancestor that was written down.
    public func place(for pointer: JSONPointer) -> (file: String?, mark: YAMLMark) {
        var tokens = pointer.tokens
        while !tokens.isEmpty {
            let ancestor = JSONPointer(tokens: tokens)
            if let mark = marks[ancestor] { return (files[ancestor] ?? file, mark) }
            tokens.removeLast()
        }
        return (file, source)
    }
}

/// Reads a configuration file (and the files it includes) and checks everything the engine itself can
/// check; kinds' own options are checked by their plugins afterwards.
public struct ConfigurationLoader: Sendable {
    public var environment: [String: String]
    /// Whether a plugin for a kind can be found (beyond the configuration's own `plugins:` section): built
    /// into hammock, or found where plugins are looked for.
    public var kindIsAvailable: @Sendable (String) -> Bool
    /// Describes where plugins were looked for, for the "unknown kind" message.
    public var pluginSearchDescription: @Sendable (String) -> String

    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        kindIsAvailable: @escaping @Sendable (String) -> Bool = { _ in false },
        pluginSearchDescription: @escaping @Sendable (String) -> String = { "plugins.\($0).command" }
    ) {
        self.environment = environment
        self.kindIsAvailable = kindIsAvailable
        self.pluginSearchDescription = pluginSearchDescription
    }

    /// A configuration larger than this is refused before it is read: a real one is a few KiB, and parsing
    /// a huge mapping would take minutes and gigabytes.
    public static let maximumFileSize = 4 << 20

    /// A secret shorter than this (in characters) is refused where it is written: redacting `e` or `42`
    /// from everything hammock writes would eat the output, and leaving it visible would not keep it secret.
    public static let minimumSecretLength = 4

    public func load(file path: String) -> Result<LoadedConfiguration, ConfigurationError> {
        switch Self.readText(at: path) {
        case .success(let text):
            return parse(text, file: path)
        case .failure(let problem):
            return .failure(
                ConfigurationError(file: path, diagnostics: [Diagnostic(YAMLMark(line: 1, column: 1), problem.message, file: path)]))
        }
    }

    struct ReadProblem: Error { var message: String }

    /// A configuration file's text, or why it cannot be read.
    static func readText(at path: String) -> Result<String, ReadProblem> {
        var info = stat()
        if stat(path, &info) == 0, Int(info.st_size) > Self.maximumFileSize {
            return .failure(
                ReadProblem(
                    message: "the file is \(info.st_size) bytes; a configuration may be at most \(Self.maximumFileSize >> 20) MiB"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(ReadProblem(message: "cannot read the file (does it exist?)"))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return .failure(ReadProblem(message: "the file is not UTF-8 text"))
        }
        return .success(text)
    }

    public func parse(_ text: String, file: String) -> Result<LoadedConfiguration, ConfigurationError> {
        var reader = ConfigurationReader(loader: self, mainFile: file)
        guard var loaded = reader.read(text) else {
            return .failure(ConfigurationError(file: file, diagnostics: reader.diagnostics, readFrom: reader.files))
        }
        // Here, not at the end of `read`: the secrets read before an early return (a file without `sources:`)
        // must be redacted from the diagnostics as well.
        loaded.configuration.secrets = reader.secrets.union(derivedSecrets(of: loaded.configuration.sources, secrets: reader.secrets))
        if reader.diagnostics.isEmpty { return .success(loaded) }
        return .failure(ConfigurationError(file: file, diagnostics: reader.diagnostics, partial: loaded))
    }
}

/// A place in one of the configuration's files.
struct Place: Hashable {
    var file: String
    var mark: YAMLMark

    var description: String { "\(file):\(mark.line):\(mark.column)" }
}

/// One file of the configuration, parsed.
struct Document {
    let file: String
    /// The file's lines, to place a problem inside a template at its column.
    let lines: [Substring]
    let root: YAMLNode
    /// The top-level mapping; nil when the file is not one (reported).
    let top: [YAMLPair]?
    /// Whether it is the main file (which alone may hold `version:`, `defaults:` and `plugins:`).
    var isMain: Bool
    /// The file's folder, which its relative paths start from: worked out once, as `enter` needs it for
    /// every source and a path's standardisation costs tens of microseconds.
    let directory: String

    init(file: String, lines: [Substring], root: YAMLNode, top: [YAMLPair]?, isMain: Bool) {
        self.file = file
        self.lines = lines
        self.root = root
        self.top = top
        self.isMain = isMain
        directory = ConfigurationReader.directory(of: file)
    }
}

/// One pass over the YAML trees that collects every problem instead of stopping at the first.
struct ConfigurationReader {
    let loader: ConfigurationLoader
    let mainFile: String
    var context: InterpolationContext
    /// The file being read, which a problem is reported in.
    var currentFile: String
    var sourceLines: [Substring] = []
    var diagnostics: [Diagnostic] = []
    var secrets: Set<String> = []
    /// Every file read so far, and every directory included.
    var files = ConfigurationFiles()
    /// The main file, then each included file in the order `include:` names them, depth first.
    var documents: [Document] = []
    /// Each document's file as it was named, by its canonical path (symbolic links resolved).
    var documentsByCanonicalPath: [String: String] = [:]
    /// By id, from every file.
    var bases: [String: BaseDeclaration] = [:]
    /// The budgets `limits:` declares, which a `limit:` may name, in order: also one whose numbers are
    /// wrong (reported there), so that its sources are not told the name is unknown.
    var budgetNames: [String] = []

    static let topLevelKeys = ConfigurationKeys.topLevel
    static let includedFileKeys = ConfigurationKeys.includedFile
    static let viewKeys = ConfigurationKeys.view

    /// Options whose values are sent as credentials: a `${NAME}` inside them is a secret, redacted from
    /// everything hammock writes. Elsewhere (a URL's path, a file path, a duration) it is configuration and
    /// stays visible; `${secret:…}`, `${file:…}` and `${cred:…}` are secrets wherever they stand.
    static let secretOptionKeys: Set<String> = ["headers", "auth", "body", "query", "env"]

    static let minimumSecretLength = ConfigurationLoader.minimumSecretLength

    /// Bounds on a configuration as a whole, each far beyond a real one, so that what is allowed is read in
    /// time and memory in proportion to it: its files together (each file alone is bounded by
    /// `ConfigurationLoader.maximumFileSize` too), how deep bases stack, and how many sources one view merges.
    static let maximumTotalSize = ConfigurationLoader.maximumFileSize
    static let maximumBaseDepth = 32
    static let maximumViewSources = 10_000
    /// The bytes of every file read so far, against `maximumTotalSize`.
    var totalSize = 0

    init(loader: ConfigurationLoader, mainFile: String) {
        self.loader = loader
        self.mainFile = mainFile
        self.currentFile = mainFile
        self.context = InterpolationContext(environment: loader.environment, configurationDirectory: Self.directory(of: mainFile))
    }

    static func directory(of file: String) -> String {
        URL(fileURLWithPath: file).standardizedFileURL.deletingLastPathComponent().path
    }

    mutating func problem(_ mark: YAMLMark, _ message: String) {
        diagnostics.append(Diagnostic(mark, message, file: currentFile))
    }

    mutating func problem(at place: Place, _ message: String) {
        diagnostics.append(Diagnostic(place.mark, message, file: place.file))
    }

    func place(_ mark: YAMLMark) -> Place { Place(file: currentFile, mark: mark) }

    /// From now on problems are reported in `document`, and its relative `${file:…}` paths are read from its
    /// folder.
    mutating func enter(_ document: Document) {
        currentFile = document.file
        sourceLines = document.lines
        context.configurationDirectory = document.directory
    }

    /// The configuration, or nil when the main file does not parse.
    mutating func read(_ text: String) -> LoadedConfiguration? {
        files.files.append(mainFile)
        totalSize = text.utf8.count
        guard let main = document(text, file: mainFile, isMain: true) else { return nil }
        collect(main, including: [canonicalPath(mainFile)])
        enter(main)
        var configuration = Configuration(sources: [])
        var positions: [SourceID: OptionPositions] = [:]
        guard let top = main.top else { return LoadedConfiguration(configuration: configuration, file: mainFile, files: files) }

        if let version = top.value("version") {
            if case .scalar(let scalar) = version.kind, scalar.resolved == .int(1) {
            } else {
                problem(version.mark, "unsupported version; this hammock reads `version: 1`")
            }
        }

        if let node = top.value("limits") { configuration.budgets = readLimits(node) }

        var defaults = SourceDefinition(id: "", kind: "")
        if let node = top.value("defaults"), let pairs = mapping(node, "defaults") {
            checkKeys(pairs, allowed: CommonSourceKey.inheritableNames, context: "defaults")
            readCommonKeys(pairs, into: &defaults)
        }

        if let node = top.value("plugins"), let pairs = mapping(node, "plugins") {
            for pair in pairs {
                guard let kind = keyText(pair.key) else { continue }
                if let definition = readPlugin(pair.value, kind: kind) { configuration.plugins[Kind(kind)] = definition }
            }
        }

        readBases()

        let declared = declarations("sources", what: "source")
        guard documents.contains(where: { $0.top?.value("sources") != nil }) else {
            problem(main.root.mark, "the configuration has no `sources:`; declare at least one source")
            return LoadedConfiguration(configuration: configuration, file: mainFile, files: files)
        }
        let sourceMarks = declared.mapValues(\.place)
        var templateMarks: [String: [(reference: TemplateReference, place: Place)]] = [:]
        for (id, declaration) in declared.sorted(by: { $0.value.order < $1.value.order }) {
            enter(documents[declaration.document])
            var references: [(TemplateReference, Place)] = []
            if let (definition, sourcePositions) = readSource(
                id: id, node: declaration.value, document: declaration.document, keyMark: declaration.place.mark,
                defaults: defaults,
                plugins: configuration.plugins, references: &references)
            {
                configuration.sources.append(definition)
                positions[SourceID(id)] = sourcePositions
            }
            templateMarks[id] = references.map { (reference: $0.0, place: $0.1) }
        }
        checkReferences(templateMarks, sourceMarks: sourceMarks, sources: configuration.sources)

        for (id, declaration) in declarations("views", what: "view").sorted(by: { $0.value.order < $1.value.order }) {
            enter(documents[declaration.document])
            if let view = readView(id: id, node: declaration.value, sourceMarks: sourceMarks) {
                configuration.views.append(view)
            }
        }
        enter(main)
        return LoadedConfiguration(configuration: configuration, file: mainFile, positions: positions, files: files)
    }

    // MARK: Sources

    mutating func readSource(
        id: String, node: YAMLNode, document: Int, keyMark: YAMLMark, defaults: SourceDefinition,
        plugins: [Kind: PluginDefinition], references: inout [(TemplateReference, Place)]
    ) -> (SourceDefinition, OptionPositions)? {
        guard let pairs = mapping(node, "source \"\(id)\"") else { return nil }
        let sourcePlace = place(keyMark)
        let own = Layer(pairs: pairs, document: document)
        var layers = [own]
        if let baseNode = pairs.value("base") {
            guard let chain = baseChain(from: baseNode, of: "source \"\(id)\"") else { return nil }
            layers = chain + layers
            enter(documents[document])
        }
        var definition = defaults
        // The YAML's text becomes the typed names here; the maps of this reader stay keyed by the text.
        definition.id = SourceID(id)
        // The kind: the source's own, else its nearest base's.
        guard let kindLayer = layers.last(where: { $0.pairs.value("kind") != nil }),
            let kindNode = kindLayer.pairs.value("kind")
        else {
            let bases = layers.count > 1 ? ", nor a base that has one" : ""
            problem(node.mark, "source \"\(id)\" has no `kind:` (fake, shell, file, rest, or a plugin's kind)\(bases)")
            return nil
        }
        enter(documents[kindLayer.document])
        guard let kind = string(kindNode, "kind") else { return nil }
        definition.kind = Kind(kind)
        if plugins[Kind(kind)] == nil && !loader.kindIsAvailable(kind) {
            let known = ["fake", "rest", "shell", "file"] + plugins.keys.sorted().map(\.rawValue)
            let hint = didYouMean(kind, among: known)
            problem(kindNode.mark, "unknown kind \"\(kind)\"\(hint): no plugin found; looked for \(loader.pluginSearchDescription(kind))")
        }

        // `defaults:`, then each base from the farthest, then the source: see `OptionLayers`.
        var options = OptionLayers()
        for layer in layers {
            let document = documents[layer.document]
            enter(document)
            readCommonKeys(layer.pairs, into: &definition)
            var layerOptions = JSONObject()
            var marks: [JSONPointer: YAMLMark] = [:]
            for pair in layer.pairs {
                guard let key = keyText(pair.key), CommonSourceKey(rawValue: key) == nil, key != "base" else { continue }
                let pointer = JSONPointer(tokens: [key])
                marks[pointer] = pair.key.mark
                layerOptions[key] = json(pair.value, pointer: pointer, marks: &marks)
            }
            options.add(layerOptions, marks: marks, file: document.file)
        }
        enter(documents[own.document])
        definition.options = options.value
        let positions = OptionPositions(
            source: keyMark, marks: options.marks, file: sourcePlace.file,
            files: options.files.filter { $0.value != sourcePlace.file })
        definition.templates = readTemplates(
            in: .object(options.value), pointer: JSONPointer(tokens: []), positions: positions, references: &references)
        return (definition, positions)
    }

    mutating func readCommonKeys(_ pairs: [YAMLPair], into definition: inout SourceDefinition) {
        for key in CommonSourceKey.allCases {
            guard let node = pairs.value(key.rawValue) else { continue }
            switch key {
            case .kind:
                continue  // read first, by `readSource`: it decides who checks the other options
            case .refresh:
                // A refresh here replaces an `at:` inherited from a base or `defaults:` (and `at` a refresh).
                if let refresh = duration(node, "refresh") {
                    definition.refresh = refresh
                    definition.schedule = nil
                }
            case .at:
                if pairs.value(CommonSourceKey.refresh.rawValue) != nil {
                    problem(node.mark, "refresh and at are both here; a source polls every refresh or at the times of at, not both")
                    continue
                }
                guard case .scalar(let scalar) = node.kind, let text = interpolated(scalar.text, at: node.mark) else {
                    problem(node.mark, "at must be a schedule such as \"*/15 * * * *\" or @hourly, found \(node.kindName)")
                    continue
                }
                do throws(ScheduleProblem) {
                    let schedule = try Schedule(text)
                    guard schedule.everMatches else {
                        problem(node.mark, "at: \"\(text)\" never matches a day of the calendar (no such date); the source would never load")
                        continue
                    }
                    definition.schedule = schedule
                    definition.refresh = nil
                } catch {
                    problem(node.mark, "at: \(error.message)")
                }
            case .expiration: definition.expiration = duration(node, "expiration") ?? definition.expiration
            case .timeout: definition.timeout = duration(node, "timeout") ?? definition.timeout
            case .retry: definition.retry = retryPolicy(node) ?? definition.retry
            case .cache:
                if case .scalar(let scalar) = node.kind, case .bool(let flag) = scalar.resolved {
                    definition.cache = flag
                } else {
                    problem(node.mark, "cache must be true or false, found \(node.kindName)")
                }
            case .keep:
                if case .scalar(let scalar) = node.kind, case .bool(let flag) = scalar.resolved {
                    definition.keep = flag
                } else {
                    problem(node.mark, "keep must be true or false, found \(node.kindName)")
                }
            case .respectServer:
                if case .scalar(let scalar) = node.kind, case .bool(let flag) = scalar.resolved {
                    definition.respectsServer = flag
                } else {
                    problem(node.mark, "respect-server must be true or false, found \(node.kindName)")
                }
            case .limit:
                guard let name = string(node, "limit") else { continue }
                guard budgetNames.contains(name) else {
                    let declared = budgetNames.isEmpty
                        ? "the configuration has no `limits:`"
                        : "limits: declares \(budgetNames.sorted().joined(separator: ", "))"
                    problem(node.mark, "limit: unknown budget \"\(name)\"\(didYouMean(name, among: budgetNames)); \(declared)")
                    continue
                }
                definition.limit = BudgetName(name)
            case .select:
                guard let text = string(node, "select") else { continue }
                if let pointer = JSONPointer(text) {
                    definition.select = pointer
                } else {
                    problem(node.mark, "select \"\(text)\" is not a JSON Pointer; write e.g. /items/0/name")
                }
            }
        }
    }

    /// `limits:`: NAME → `{requests: N, per: DURATION}`, each within `BudgetLimit`'s bounds.
    mutating func readLimits(_ node: YAMLNode) -> [BudgetName: BudgetLimit] {
        guard let pairs = mapping(node, "limits") else { return [:] }
        var budgets: [BudgetName: BudgetLimit] = [:]
        for pair in pairs {
            guard let name = keyText(pair.key) else { continue }
            guard isValidIdentifier(name) else {
                problem(pair.key.mark, "budget name \"\(name)\" must hold only letters, digits, _ and -")
                continue
            }
            budgetNames.append(name)
            let what = "limits.\(name)"
            guard let fields = mapping(pair.value, what) else { continue }
            checkKeys(fields, allowed: ["requests", "per"], context: what)
            var requests: Int?
            if let node = fields.value("requests") {
                requests = budgetRequests(node, what)
            } else {
                problem(pair.value.mark, "\(what) has no requests: how many loads may start in any window of `per`")
            }
            var per: Duration?
            if let node = fields.value("per") {
                per = duration(node, "\(what).per")
                if let window = per, window > BudgetLimit.longestPer {
                    problem(
                        node.mark,
                        "\(what).per is \(window.humanReadable); a budget's window may be at most \(BudgetLimit.longestPer.humanReadable) (its starts are counted in memory since hammock started)")
                    per = nil
                }
            } else {
                problem(pair.value.mark, "\(what) has no per: the window, such as 1s, 1m or 1h")
            }
            if let requests, let per { budgets[BudgetName(name)] = BudgetLimit(requests: requests, per: per) }
        }
        return budgets
    }

    mutating func budgetRequests(_ node: YAMLNode, _ what: String) -> Int? {
        let bounds = "a whole number from 1 to \(BudgetLimit.maximumRequests)"
        guard case .scalar(let scalar) = node.kind else {
            problem(node.mark, "\(what).requests must be \(bounds), found \(node.kindName)")
            return nil
        }
        guard let text = interpolated(scalar.text, at: node.mark) else { return nil }
        guard let number = Int(text.trimming { $0 == " " }), (1...BudgetLimit.maximumRequests).contains(number) else {
            problem(node.mark, "\(what).requests must be \(bounds), found \(text)")
            return nil
        }
        return number
    }

    mutating func retryPolicy(_ node: YAMLNode) -> RetryPolicy? {
        switch node.kind {
        case .scalar(let scalar):
            switch scalar.resolved {
            case .bool(false): return .off
            case .bool(true): return .standard
            case .string("off"): return .off
            case .string("on"): return .standard
            default:
                guard let initial = duration(node, "retry") else { return nil }
                return RetryPolicy(initialDelay: initial)
            }
        case .mapping(let pairs):
            checkKeys(pairs, allowed: ["initial", "max", "on"], context: "retry")
            var policy = RetryPolicy.standard
            if let node = pairs.value("on"), let text = string(node, "retry.on") {
                switch text {
                case "transient": policy.retriesEveryError = false
                case "any": policy.retriesEveryError = true
                default:
                    problem(node.mark, "retry.on must be `transient` (failures a retry can cure, the default) or `any`, found \"\(text)\"")
                }
            }
            if let node = pairs.value("initial"), let initial = duration(node, "retry.initial") {
                policy.initialDelay = initial
                policy.maximumDelay = max(initial, policy.maximumDelay)
            }
            if let node = pairs.value("max"), let maximum = duration(node, "retry.max") {
                policy.maximumDelay = max(maximum, policy.initialDelay)
            }
            return policy
        case .sequence:
            problem(node.mark, "retry must be off, a duration (the first delay) or {initial, max, on}, found a list")
            return nil
        }
    }


    mutating func readTemplates(
        in value: JSONValue, pointer: JSONPointer, positions: OptionPositions,
        references: inout [(TemplateReference, Place)]
    ) -> [TemplatedOption] {
        let found = positions.place(for: pointer)
        let place = Place(file: found.file ?? mainFile, mark: found.mark)
        switch value {
        case .string(let text):
            let template: Template?
            do {
                template = try Template.parse(text)
            } catch {
                problem(at: place, error.message)
                return []
            }
            guard let template else { return [] }
            references += template.references.map { ($0, place) }
            // Which options may hold templates, and which are URL-encoded, is the kind's plugin's to say
            // (`TemplateRules`, in its hello): the engine applies its rules when the plugin checks the sources.
            return [TemplatedOption(pointer: pointer, template: template, percentEncode: false)]
        case .array(let items):
            return items.indices.flatMap { index in
                readTemplates(
                    in: items[index], pointer: pointer.appending(String(index)), positions: positions,
                    references: &references)
            }
        case .object(let object):
            return object.flatMap { key, item in
                readTemplates(in: item, pointer: pointer.appending(key), positions: positions, references: &references)
            }
        default:
            return []
        }
    }

    /// Every reference names a known source, and no source depends on itself, however indirectly.
    mutating func checkReferences(
        _ references: [String: [(reference: TemplateReference, place: Place)]], sourceMarks: [String: Place],
        sources: [SourceDefinition]
    ) {
        for source in sources {
            for entry in references[source.id.rawValue] ?? [] where sourceMarks[entry.reference.source] == nil {
                // Sorted: among equally close names the suggestion must not depend on the run's hash seed.
                let hint = didYouMean(entry.reference.source, among: sourceMarks.keys.sorted())
                problem(at: entry.place, "{{ \(entry.reference) }} refers to unknown source \"\(entry.reference.source)\"\(hint)")
            }
        }
        let inputs = Dictionary(uniqueKeysWithValues: sources.map { ($0.id, $0.inputs) })
        var state: [SourceID: Int] = [:]  // 1: on the current path, 2: done
        var reported = Set<String>()
        func visit(_ id: SourceID, path: [SourceID], _ reader: inout ConfigurationReader) {
            state[id] = 1
            for input in inputs[id] ?? [] where inputs[input] != nil {
                if state[input] == 1 {
                    let cycle = Array(path[path.firstIndex(of: input)!...]) + [input]
                    if reported.insert(Set(cycle).sorted().map(\.rawValue).joined(separator: ",")).inserted {
                        let place = references[input.rawValue]?.first?.place ?? sourceMarks[input.rawValue]!
                        reader.problem(at: place, "dependency cycle: \(cycle.map(\.rawValue).joined(separator: " → "))")
                    }
                } else if state[input] == nil {
                    visit(input, path: path + [input], &reader)
                }
            }
            state[id] = 2
        }
        for source in sources where state[source.id] == nil { visit(source.id, path: [source.id], &self) }
    }

    // MARK: Views and plugins

    mutating func readView(id: String, node: YAMLNode, sourceMarks: [String: Place]) -> ViewDefinition? {
        guard let pairs = mapping(node, "view \"\(id)\"") else { return nil }
        checkKeys(pairs, allowed: Self.viewKeys, context: "view \"\(id)\"")
        var sources: [String] = []
        if let node = pairs.value("sources") {
            if let items = sequence(node, "sources") {
                if items.isEmpty { problem(node.mark, "view \"\(id)\" lists no sources") }
                guard items.count <= Self.maximumViewSources else {
                    problem(
                        node.mark,
                        "view \"\(id)\" lists \(items.count) sources; a view may merge at most \(Self.maximumViewSources), so split it into several views")
                    return nil
                }
                // A set beside the list: looking through the list for each source made a view of thousands
                // quadratic.
                var listed = Set<String>()
                for item in items {
                    guard let source = string(item, "a view's source") else { continue }
                    if !listed.insert(source).inserted {
                        problem(item.mark, "view \"\(id)\" lists source \"\(source)\" twice")
                        continue
                    }
                    if sourceMarks[source] == nil {
                        // Sorted, as above: the same file must give the same message on every run.
                        let hint = didYouMean(source, among: sourceMarks.keys.sorted())
                        problem(item.mark, "view \"\(id)\" uses unknown source \"\(source)\"\(hint)")
                    }
                    sources.append(source)
                }
            }
        } else {
            problem(node.mark, "view \"\(id)\" has no `sources:`")
        }
        var ready = Readiness.all
        if let node = pairs.value("ready"), let text = string(node, "ready") {
            if let parsed = Readiness(rawValue: text) { ready = parsed } else {
                problem(node.mark, "ready must be `all` or `any`, found \"\(text)\"")
            }
        }
        var display: [DisplayRule]?
        if let node = pairs.value("display") {
            display = displayRules(node)
        }
        var render: ViewRender?
        if let node = pairs.value("render") {
            render = readRender(node, view: id, sources: sources)
        }
        var onClick: [Int: ClickAction] = [:]
        if let node = pairs.value("on-click") {
            onClick = readOnClick(node, view: id)
        }
        return ViewDefinition(
            id: ViewID(id), sources: sources.map { SourceID($0) }, ready: ready, display: display, render: render, onClick: onClick)
    }

    /// A view's `on-click:`: a button (`left`, `middle`, `right`, `scroll-up`, `scroll-down`, `back`,
    /// `forward`, or its number, 1 to 9) to `load`, `retry`, `loadIfNeeded`, or `{ run: COMMAND }`.
    mutating func readOnClick(_ node: YAMLNode, view id: String) -> [Int: ClickAction] {
        let context = "on-click of view \"\(id)\""
        guard let pairs = mapping(node, context) else { return [:] }
        let names = ClickAction.buttons.map(\.key)
        var actions: [Int: ClickAction] = [:]
        var named: Set<Int> = []
        for pair in pairs {
            guard let key = keyText(pair.key) else { continue }
            let button = ClickAction.buttons.first { $0.key == key }?.value ?? Int(key).flatMap { (1...9).contains($0) ? $0 : nil }
            guard let button else {
                let hint = didYouMean(key, among: names)
                problem(pair.key.mark, "\(context): \"\(key)\" is not a button\(hint); buttons: \(names.joined(separator: ", ")), or a number from 1 to 9")
                continue
            }
            guard named.insert(button).inserted else {
                problem(pair.key.mark, "\(context) says twice what button \(button) does")
                continue
            }
            if let action = clickAction(pair.value, what: "\(context), \(key)") { actions[button] = action }
        }
        return actions
    }

    mutating func clickAction(_ node: YAMLNode, what: String) -> ClickAction? {
        let operations = ClickAction.operations.keys.sorted()
        let expected = "\(operations.joined(separator: ", ")), or { run: COMMAND }"
        switch node.kind {
        case .scalar:
            guard let word = string(node, what) else { return nil }
            if let action = ClickAction.operations[word] { return action }
            let hint = didYouMean(word, among: operations)
            problem(node.mark, "\(what): \"\(word)\" is not an action\(hint); actions: \(expected)")
            return nil
        case .mapping(let pairs):
            checkKeys(pairs, allowed: ["run"], context: what)
            guard let command = pairs.value("run") else {
                problem(node.mark, "\(what) needs `run:`, the command to run")
                return nil
            }
            guard let text = string(command, "\(what), run") else { return nil }
            guard !text.trimmingWhitespace().isEmpty else {
                problem(command.mark, "\(what), run: the command is empty")
                return nil
            }
            return .run(text)
        default:
            problem(node.mark, "\(what) must be one of \(expected), found \(node.kindName)")
            return nil
        }
    }

    /// A view's `render:` block: the templates at the top, and under `loading:`, `error:` and `idle:`.
    mutating func readRender(_ node: YAMLNode, view id: String, sources: [String]) -> ViewRender? {
        let context = "render of view \"\(id)\""
        guard let pairs = mapping(node, context) else { return nil }
        let fields = ViewRender.Field.allCases.map(\.rawValue)
        checkKeys(pairs, allowed: fields + ViewRender.overridableStatuses.map(\.rawValue), context: context)
        var render = ViewRender(templates: renderTemplates(pairs, path: "render", view: id, sources: sources))
        for status in ViewRender.overridableStatuses {
            let path = "render.\(status.rawValue)"
            guard let node = pairs.value(status.rawValue), let statusPairs = mapping(node, "\(path) of view \"\(id)\"")
            else { continue }
            checkKeys(statusPairs, allowed: fields, context: "\(path) of view \"\(id)\"")
            render.overrides[status] = renderTemplates(statusPairs, path: path, view: id, sources: sources)
        }
        return render
    }

    /// Each field's template, parsed; a template that does not parse, or that names neither one of the view's
    /// sources nor a name every view has (`status`, …), is a problem at the place it was written.
    mutating func renderTemplates(
        _ pairs: [YAMLPair], path: String, view id: String, sources: [String]
    ) -> [ViewRender.Field: RenderTemplate] {
        var templates: [ViewRender.Field: RenderTemplate] = [:]
        for field in ViewRender.Field.allCases {
            guard let node = pairs.value(field.rawValue) else { continue }
            let what = "\(path).\(field.rawValue) of view \"\(id)\""
            // Any scalar: `urgent: true` and `percentage: 50` are templates without `{{ }}`.
            guard case .scalar(let scalar) = node.kind else {
                // `text: {{ load }}` unquoted is a YAML flow mapping: the likeliest way to get here.
                let hint = if case .mapping = node.kind { " (quote a template that starts with {{)" } else { "" }
                problem(node.mark, "\(what) must be a template such as \"{{ source }}\", found \(node.kindName)\(hint)")
                continue
            }
            guard let text = interpolated(scalar.text, at: node.mark) else { continue }
            let template: RenderTemplate
            do {
                template = try RenderTemplate.parse(text)
            } catch {
                let mark = text == scalar.text ? self.mark(of: error.offset, in: scalar, at: node.mark) : node.mark
                problem(mark, "\(what): \(error.message)")
                continue
            }
            let known = sources + ViewRender.reservedNames
            for reference in template.references where !known.contains(reference.source) {
                let hint = didYouMean(reference.source, among: known)
                problem(
                    node.mark,
                    "\(what): {{ \(reference) }} names neither a source of the view nor \(ViewRender.reservedNames.joined(separator: ", "))\(hint)"
                )
            }
            templates[field] = template
        }
        return templates
    }

    /// The place of the template's `offset`th Unicode scalar in the file, when the scalar's text stands on its
    /// line as written (plain or quoted, without escapes or folding); else the scalar's own mark.
    func mark(of offset: Int, in scalar: YAMLScalar, at start: YAMLMark) -> YAMLMark {
        let opening: Int
        switch scalar.style {
        case .plain: opening = 0
        case .singleQuoted, .doubleQuoted: opening = 1
        case .literal, .folded: return start
        }
        guard start.line >= 1, start.line <= sourceLines.count else { return start }
        let line = sourceLines[start.line - 1].unicodeScalars.dropFirst(start.column - 1 + opening)
        let written = scalar.text.unicodeScalars.prefix(offset + 1)
        guard line.starts(with: written) else { return start }
        return YAMLMark(line: start.line, column: start.column + opening + offset)
    }

    mutating func displayRules(_ node: YAMLNode) -> [DisplayRule]? {
        let presets = DisplayRule.presets.keys.sorted()
        if case .scalar = node.kind, let name = string(node, "display") {
            if let rules = DisplayRule.presets[name] { return rules }
            let hint = didYouMean(name, among: presets)
            problem(node.mark, "unknown display preset \"\(name)\"\(hint); presets: \(presets.joined(separator: ", ")), or a list of rules")
            return nil
        }
        guard let items = sequence(node, "display") else { return nil }
        if items.isEmpty {
            // No rule would ever match, so the view would say `idle` whatever its sources do.
            problem(node.mark, "display is an empty list; give rules such as [anyData, loading, error], or a preset: \(presets.joined(separator: ", "))")
            return nil
        }
        let names = DisplayRule.allCases.map(\.rawValue)
        var rules: [DisplayRule] = []
        for item in items {
            guard let name = string(item, "a display rule") else { continue }
            if let rule = DisplayRule(rawValue: name) { rules.append(rule) } else {
                let hint = didYouMean(name, among: names)
                problem(item.mark, "unknown display rule \"\(name)\"\(hint); rules: \(names.joined(separator: ", "))")
            }
        }
        return rules
    }

    mutating func readPlugin(_ node: YAMLNode, kind: String) -> PluginDefinition? {
        guard let pairs = mapping(node, "plugins.\(kind)") else { return nil }
        checkKeys(pairs, allowed: ["command"], context: "plugins.\(kind)")
        guard let commandNode = pairs.value("command") else {
            problem(node.mark, "plugins.\(kind) has no `command:` (a list: program and arguments)")
            return nil
        }
        guard case .sequence(let items) = commandNode.kind else {
            problem(commandNode.mark, "plugins.\(kind).command must be a list such as [python3, plugin.py], found \(commandNode.kindName)")
            return nil
        }
        let argv = items.compactMap { string($0, "a command argument") }
        guard argv.count == items.count else { return nil }
        guard !argv.isEmpty else {
            problem(commandNode.mark, "plugins.\(kind).command is empty")
            return nil
        }
        return PluginDefinition(command: argv)
    }

    // MARK: Typed reading

    mutating func checkKeys(_ pairs: [YAMLPair], allowed: [String], context: String) {
        for pair in pairs {
            guard let key = keyText(pair.key) else { continue }
            if !allowed.contains(key) { problem(pair.key.mark, unknownKeyMessage(key, known: allowed, context: context)) }
        }
    }

    mutating func keyText(_ node: YAMLNode) -> String? {
        if case .scalar(let scalar) = node.kind { return scalar.text }
        problem(node.mark, "a key must be a plain name, found \(node.kindName)")
        return nil
    }

    mutating func mapping(_ node: YAMLNode, _ what: String) -> [YAMLPair]? {
        if case .mapping(let pairs) = node.kind { return pairs }
        problem(node.mark, "\(what) must be a mapping, found \(node.kindName)")
        return nil
    }

    mutating func sequence(_ node: YAMLNode, _ what: String) -> [YAMLNode]? {
        if case .sequence(let items) = node.kind { return items }
        problem(node.mark, "\(what) must be a list, found \(node.kindName)")
        return nil
    }

    /// A string value, with `${NAME}` filled in.
    mutating func string(_ node: YAMLNode, _ what: String) -> String? {
        guard case .scalar(let scalar) = node.kind, case .string = scalar.resolved else {
            problem(node.mark, "\(what) must be a string, found \(node.kindName)")
            return nil
        }
        return interpolated(scalar.text, at: node.mark)
    }

    /// `text` with `${…}` filled in; `isSecret` when it is bound for a request header, a body, a command's
    /// environment and the like (`secretOptionKeys`).
    mutating func interpolated(_ text: String, at mark: YAMLMark, isSecret: Bool = false) -> String? {
        switch interpolate(text, in: context) {
        case .success(let result):
            let found = result.secrets + (isSecret ? result.values : [])
            for secret in found where secret.count < Self.minimumSecretLength {
                // Not quoted, and not kept as a secret: redacting one letter would blank it out of every message.
                problem(
                    mark,
                    "a secret here is shorter than \(Self.minimumSecretLength) characters, too short to keep out of the output (hiding it would blank out its letters everywhere); use a longer secret, or write the value itself if it is not secret")
            }
            secrets.formUnion(found.filter { $0.count >= Self.minimumSecretLength })
            return result.text
        case .failure(let failure):
            problem(mark, failure.message)
            return nil
        }
    }

    mutating func duration(_ node: YAMLNode, _ what: String) -> Duration? {
        guard case .scalar(let scalar) = node.kind else {
            problem(node.mark, "\(what) must be a duration such as 5s, found \(node.kindName)")
            return nil
        }
        guard let text = interpolated(scalar.text, at: node.mark) else { return nil }
        switch parseDuration(text) {
        case .success(let value) where value > .zero:
            return value
        case .success:
            problem(node.mark, "\(what) must be longer than zero")
            return nil
        case .failure(let failure):
            problem(node.mark, "\(what): \(failure.message)")
            return nil
        }
    }

    /// A kind's option as JSON, recording where each member stands.
    mutating func json(_ node: YAMLNode, pointer: JSONPointer, marks: inout [JSONPointer: YAMLMark]) -> JSONValue {
        switch node.kind {
        case .scalar(let scalar):
            switch scalar.resolved {
            case .null: return .null
            case .bool(let flag): return .bool(flag)
            case .int(let number): return .number(JSONNumber(number))
            case .float(let number):
                guard let value = JSONNumber(exactly: number) else {
                    problem(node.mark, "\(scalar.text) is not a number JSON can carry")
                    return .null
                }
                return .number(value)
            case .string(let text):
                let isSecret = pointer.tokens.first.map(Self.secretOptionKeys.contains) ?? false
                return .string(interpolated(text, at: node.mark, isSecret: isSecret) ?? text)
            }
        case .sequence(let items):
            return .array(
                items.enumerated().map { index, item in
                    let itemPointer = pointer.appending(String(index))
                    marks[itemPointer] = item.mark
                    return json(item, pointer: itemPointer, marks: &marks)
                })
        case .mapping(let pairs):
            var object = JSONObject()
            for pair in pairs {
                guard let key = keyText(pair.key) else { continue }
                let memberPointer = pointer.appending(key)
                marks[memberPointer] = pair.key.mark
                object[key] = json(pair.value, pointer: memberPointer, marks: &marks)
            }
            return .object(object)
        }
    }
}

extension [YAMLPair] {
    func value(_ key: String) -> YAMLNode? {
        first { if case .scalar(let scalar) = $0.key.kind { scalar.text == key } else { false } }?.value
    }
}

func isValidIdentifier(_ id: String) -> Bool {
    !id.isEmpty && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
}
