import APNs
import ArgumentParser
import Foundation
import LiveActivityKit
import NIOCore

struct Channels: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage iOS 18 broadcast channels: create, read, list, delete.",
        discussion: ExitStatus.helpText,
        subcommands: [Create.self, Read.self, List.self, Delete.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a channel and print its id.")

        @OptionGroup var connection: ConnectionOptions

        @Option(
            help: ArgumentHelp(
                "0: no message stored (frequent updates); 1: the most recent message is kept up to 8 h for offline devices.", valueName: "0|1"))
        var storagePolicy: Int = 0

        @Flag(help: "Print the exact request (provider token elided) instead of sending it.")
        var dryRun = false

        func run() async throws {
            let request = try checked {
                guard let policy = MessageStoragePolicy(rawValue: storagePolicy) else {
                    throw InputError("storage-policy: must be 0 or 1, got \(storagePolicy)")
                }
                return APNsRequest.createChannel(bundleID: try connection.resolvedBundleID(), storagePolicy: policy)
            }
            try await perform(request, connection: connection, dryRun: dryRun)
        }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a channel's configuration.")

        @OptionGroup var connection: ConnectionOptions
        @Option(help: ArgumentHelp("The channel id.", valueName: "id")) var channelID: String
        @Flag(help: "Print the exact request instead of sending it.") var dryRun = false

        func run() async throws {
            let request = try checked { try APNsRequest.readChannel(channelID, bundleID: connection.resolvedBundleID()) }
            try await perform(request, connection: connection, dryRun: dryRun, onSuccess: describeWithBody)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's channel ids in this environment.")

        @OptionGroup var connection: ConnectionOptions
        @Flag(help: "Print the exact request instead of sending it.") var dryRun = false

        func run() async throws {
            let request = try checked { APNsRequest.listChannels(bundleID: try connection.resolvedBundleID()) }
            try await perform(request, connection: connection, dryRun: dryRun, onSuccess: describeWithBody)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel; its id is never reissued.")

        @OptionGroup var connection: ConnectionOptions
        @Option(help: ArgumentHelp("The channel id.", valueName: "id")) var channelID: String
        @Flag(help: "Print the exact request instead of sending it.") var dryRun = false

        func run() async throws {
            let request = try checked { try APNsRequest.deleteChannel(channelID, bundleID: connection.resolvedBundleID()) }
            try await perform(request, connection: connection, dryRun: dryRun)
        }
    }
}

private func describeWithBody(_ raw: APNsRawResponse) -> String {
    var text = describeAccepted(raw)
    if let body = raw.body { text += "\n" + String(buffer: body) }
    return text
}
