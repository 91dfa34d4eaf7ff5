"""A stateful fake Linear (GraphQL) for the Linear provider's tests, the end-to-end loop and its
own tests; it serves ``schema.graphql``, a subset of Linear's public SDL."""
