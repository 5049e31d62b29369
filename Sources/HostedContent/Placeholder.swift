public enum HostedContentPlaceholder {}
